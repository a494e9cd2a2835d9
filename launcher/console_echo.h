// What the console shows while a job runs: each complete line a rank writes, as
// "[node:R] line". --ranks-filter and --quiet narrow the console only, never the log files.
#pragma once

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>

namespace dtrain {

// Buffers each rank's partial line until its newline (or until the rank ends), then writes the
// whole prefixed line with one call, so lines of different ranks never mix.
class ConsoleEcho {
 public:
  // `hosts`: rank -> node name. Empty `ranks` shows every rank; `quiet` shows none.
  ConsoleEcho(std::FILE* out, std::map<int, std::string> hosts, std::set<int> ranks, bool quiet);

  void Output(int rank, std::string_view bytes);
  // Shows a rank's unterminated last line, if any (call when the rank has ended).
  void Finish(int rank);

 private:
  bool Shows(int rank) const;
  void EmitLine(int rank, std::string_view line);

  std::FILE* out_;
  std::map<int, std::string> hosts_;
  std::set<int> ranks_;
  bool quiet_;
  std::map<int, std::string> partial_;
};

}  // namespace dtrain
