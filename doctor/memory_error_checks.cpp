// The rule about EDAC's memory error counters since boot (/sys/devices/system/edac/mc): each DIMM
// (or rank) with an uncorrected error is an error, one with corrected errors a warning, and so are
// a controller's errors that no DIMM was named for. Where a node has the counters they are the
// record: the kernel log's EDAC lines may have left its ring buffer, and are not counted again
// (kernel_log_checks.cpp).
#include <map>
#include <utility>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"

namespace dtrain {

using checks::Make;
using checks::Reached;

namespace {

Finding CountFinding(const NodeFacts& n, bool uncorrected, long long count,
                     const std::string& where) {
  if (uncorrected) {
    return Make(Severity::kError, "host-errors", "", {n.host},
                fmt::format("node {}: {} uncorrected memory error(s) on {} since boot (EDAC's "
                            "counters)",
                            n.host, count, where),
                "a memory module failed: the next error may hit a rank or the kernel. Drain the "
                "node and have the module replaced (ras-mc-ctl --errors, edac-util -v, the BMC's "
                "event log: ipmitool sel elist)");
  }
  return Make(Severity::kWarning, "host-errors", "", {n.host},
              fmt::format("node {}: {} corrected memory error(s) on {} since boot (EDAC's "
                          "counters)",
                          n.host, count, where),
              "a memory module may be wearing out: watch whether the count grows (ras-mc-ctl "
              "--error-count), and have it replaced before an error is one ECC cannot correct");
}

}  // namespace

std::vector<Finding> CheckMemoryErrors(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    // A controller's totals less what its DIMMs' counters hold: errors no DIMM was named for.
    std::map<std::string, std::pair<long long, long long>> unnamed;
    std::vector<std::string> controllers;
    for (const MemoryErrorCount& c : n->health.memory_error_counts) {
      if (c.dimm.empty()) {
        controllers.push_back(c.controller);
        unnamed[c.controller] = {c.uncorrected, c.corrected};
        continue;
      }
      unnamed[c.controller].first -= c.uncorrected;
      unnamed[c.controller].second -= c.corrected;
      const std::string where = c.label.empty()
                                    ? fmt::format("{}/{}", c.controller, c.dimm)
                                    : fmt::format("DIMM {} ({}/{})", c.label, c.controller, c.dimm);
      if (c.uncorrected > 0) out.push_back(CountFinding(*n, true, c.uncorrected, where));
      if (c.corrected > 0) out.push_back(CountFinding(*n, false, c.corrected, where));
    }
    for (const std::string& mc : controllers) {
      const auto [uncorrected, corrected] = unnamed[mc];
      const std::string where = "memory controller " + mc + " (no DIMM named)";
      if (uncorrected > 0) out.push_back(CountFinding(*n, true, uncorrected, where));
      if (corrected > 0) out.push_back(CountFinding(*n, false, corrected, where));
    }
  }
  return out;
}

}  // namespace dtrain
