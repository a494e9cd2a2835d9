// Whole lines out of the pieces a rank's output arrives in, per rank and stream: a line cut
// across pieces is given whole once its newline comes, a line still unterminated past
// kMaxPartialLine bytes is given in pieces of that size (a rank that never writes a newline
// cannot grow it without bound), and what is left when the rank ends is given by Finish. Used by
// the console (console_echo.h) and torchrun's filtered copies (filtered_output.h).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "launcher/transport.h"

namespace dtrain {

constexpr size_t kMaxPartialLine = 64 * 1024;

class RankLines {
 public:
  using Emit = std::function<void(int rank, OutputStream stream, std::string_view line)>;
  explicit RankLines(Emit emit) : emit_(std::move(emit)) {}

  void Add(int rank, OutputStream stream, std::string_view bytes);
  // The rank ended: its unterminated last lines, if any.
  void Finish(int rank);
  // Every rank's unterminated last lines (the output ends).
  void FinishAll();

 private:
  Emit emit_;
  std::map<std::pair<int, OutputStream>, std::string> partial_;
};

}  // namespace dtrain
