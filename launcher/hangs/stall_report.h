// The stall report: for every rank of a stalled job, its node, pid, state, seconds since its last
// progress, last log line and where it is (the collective it waits in, its Python stack, or the
// kernel's view), and which rank the others wait for. Pure: facts in, text out.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launcher/hangs/rank_probe.h"

namespace dtrain {

// One rank as the launcher sees it when the report is made.
struct RankView {
  int rank = 0;
  std::string host;
  bool ended = false;
  std::string exit;   // how it ended, when it did
  double idle_s = 0;  // seconds since its last progress
  std::string last_line;
  std::optional<RankFacts> facts;  // absent: the probe did not find it
};

struct StallReport {
  std::string text;           // the whole report, lines ending in '\n'
  std::string summary;        // one line: who waits for whom
  std::vector<int> culprits;  // the ranks the others wait for (best guess, never empty)
  std::vector<int> stalled;   // ranks idle for at least the timeout
};

// `node_errors`: nodes the probe could not read (named in the report).
StallReport MakeStallReport(const std::vector<RankView>& ranks, double timeout_s,
                            const std::map<std::string, std::string>& node_errors);

// "0,1,3" / "0-3"
std::string RankList(const std::vector<int>& ranks);

// The frame a Python rank is in: its main thread's innermost frame, "func (file:line)", followed
// by the source line when known. "" without a stack.
std::string InnermostFrame(const RankProcess& process);

}  // namespace dtrain
