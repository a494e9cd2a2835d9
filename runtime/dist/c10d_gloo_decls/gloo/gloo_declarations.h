// The gloo names c10d's ProcessGroupGloo.hpp mentions, declared and nothing more.
//
// The PyPI torch wheel links Gloo into libtorch_cpu but ships none of Gloo's headers, and
// ProcessGroupGloo.hpp includes five of them. dtrain-clip uses ProcessGroupGloo only through its
// exported functions (the constructor, Options, createDevice*), whose layouts hold gloo types only
// behind shared_ptr/unique_ptr. So declaring the names is enough, and nothing dtrain compiles may
// depend on a gloo class's layout or emit gloo code of its own: the test runtime.gloo_abi checks
// the built library for any definition in namespace gloo (vtables, typeinfo, inline functions) or
// of ProcessGroupGloo::GlooStore, and fails if it finds one. These declarations match Gloo's own
// headers; they are never compiled into a definition.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace gloo {

class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};

namespace rendezvous {
class Store {
 public:
  virtual ~Store();
  virtual void set(const std::string& key, const std::vector<char>& data) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) = 0;
};
}  // namespace rendezvous

namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport

}  // namespace gloo
