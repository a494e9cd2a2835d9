// What the console shows while a job runs: each complete line a rank writes, as
// "[node:R] line" — its stdout lines on dtrain's stdout and its stderr lines on dtrain's stderr
// (so `2>err.txt` catches tracebacks). --console (or torchrun's --redirects and --tee),
// --ranks-filter, torchrun's --local-ranks-filter and --quiet narrow the console only, never the
// log files.
#pragma once

#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "launcher/rank_lines.h"
#include "launcher/transport.h"

namespace dtrain {

// Which of a rank's streams reach the console (torchrun's --tee 0..3).
enum class ConsoleStreams { kNone = 0, kStdout = 1, kStderr = 2, kBoth = 3 };

// What the console shows of the ranks.
struct ConsoleChoice {
  ConsoleStreams streams = ConsoleStreams::kBoth;  // every local rank not in local_streams
  std::map<int, ConsoleStreams> local_streams;     // by local rank (torchrun's -r 0:1,1:2)
  std::set<int> ranks;                             // --ranks-filter; empty: every rank
  std::set<int> local_ranks;  // torchrun's --local-ranks-filter; empty: every local rank
  bool timestamps = false;    // horovodrun's --prefix-output-with-timestamp: the local time first
};

// The local time as horovodrun's --prefix-output-with-timestamp writes it (Python's
// time.asctime(): "Fri Nov  7 15:14:06 2026").
std::string HorovodrunTimestamp();

// Where a rank runs, as the console names it.
struct ConsoleRank {
  std::string host;
  int local_rank = 0;
};

// Buffers each rank's partial line per stream until its newline (or until the rank ends), then
// writes the whole prefixed line with one call, so lines of different ranks never mix.
class ConsoleEcho {
 public:
  ConsoleEcho(std::FILE* out, std::FILE* err, ConsoleChoice choice);
  ConsoleEcho(const ConsoleEcho&) = delete;  // its lines go to this object
  ConsoleEcho& operator=(const ConsoleEcho&) = delete;

  void Output(int rank, OutputStream stream, std::string_view bytes);
  // The ranks of an attempt (a restart may run on other nodes): rank -> node and local rank.
  void SetRanks(std::map<int, ConsoleRank> ranks) { ranks_ = std::move(ranks); }
  // Shows a rank's unterminated last lines, if any (call when the rank has ended).
  void Finish(int rank);

 private:
  bool Shows(int rank, OutputStream stream) const;
  void EmitLine(int rank, OutputStream stream, std::string_view line);

  std::FILE* out_;
  std::FILE* err_;
  ConsoleChoice choice_;
  std::map<int, ConsoleRank> ranks_;
  RankLines lines_{[this](int rank, OutputStream stream, std::string_view line) {
    EmitLine(rank, stream, line);
  }};
};

}  // namespace dtrain
