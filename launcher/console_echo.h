// What the console shows while a job runs: each complete line a rank writes, as
// "[node:R] line" — its stdout lines on dtrain's stdout and its stderr lines on dtrain's stderr
// (so `2>err.txt` catches tracebacks). --console, --ranks-filter and --quiet narrow the console
// only, never the log files.
#pragma once

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "launcher/transport.h"

namespace dtrain {

// Which of a rank's streams reach the console (torchrun's --tee 0..3).
enum class ConsoleStreams { kNone = 0, kStdout = 1, kStderr = 2, kBoth = 3 };

// Buffers each rank's partial line per stream until its newline (or until the rank ends), then
// writes the whole prefixed line with one call, so lines of different ranks never mix.
class ConsoleEcho {
 public:
  // `hosts`: rank -> node name. Empty `ranks` shows every rank.
  ConsoleEcho(std::FILE* out, std::FILE* err, std::map<int, std::string> hosts, std::set<int> ranks,
              ConsoleStreams streams);

  void Output(int rank, OutputStream stream, std::string_view bytes);
  // A restart on other nodes: rank -> node name from now on.
  void SetHosts(std::map<int, std::string> hosts) { hosts_ = std::move(hosts); }
  // Shows a rank's unterminated last lines, if any (call when the rank has ended).
  void Finish(int rank);

 private:
  bool Shows(int rank, OutputStream stream) const;
  void EmitLine(int rank, OutputStream stream, std::string_view line);

  std::FILE* out_;
  std::FILE* err_;
  std::map<int, std::string> hosts_;
  std::set<int> ranks_;
  ConsoleStreams streams_;
  std::map<std::pair<int, OutputStream>, std::string> partial_;
};

}  // namespace dtrain
