// Python's pickle format, as far as dtrain speaks it with Horovod's elastic workers: read the
// values a worker registers with the rendezvous (a tuple of a dict of lists of (address, port)
// tuples and a bytes key) and the replies of its notification service (an instance of a class,
// by name), and write the one request dtrain sends (an instance of a named class with a few
// integer attributes). Protocols 2 to 5 (what pickle and cloudpickle write; bytes need 3, as
// protocol 2 writes them as a call); anything else, or input that is not a well-formed pickle of
// those, is an Error, never a crash. Nothing is imported or called: a class is only its name.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dtrain {

struct PickleValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kTuple, kDict, kObject };
  Kind kind = Kind::kNone;
  int64_t integer = 0;  // kInt, kBool (0 or 1)
  double number = 0;    // kFloat
  // kString, kBytes: the text or bytes; kObject: the class as "module.name".
  std::string text;
  std::vector<std::shared_ptr<PickleValue>> items;  // kList, kTuple
  // kDict: the pairs in order; kObject: its state (BUILD's dict), if any.
  std::vector<std::pair<std::shared_ptr<PickleValue>, std::shared_ptr<PickleValue>>> pairs;
  size_t depth = 1;  // how deep its items nest (1: none)
};

// The value a pickle holds; throws Error saying what is wrong (at which byte) otherwise.
PickleValue ReadPickle(std::string_view bytes);

// A pickle (protocol 2) of an instance of `module`.`name` whose attributes are `state`, as
// pickle.dumps writes one of a plain class; the reader unpickles it without calling __init__.
std::string PickleObject(const std::string& module, const std::string& name,
                         const std::vector<std::pair<std::string, int64_t>>& state);

}  // namespace dtrain
