// Flaky links: the error counters of the links a job's traffic crosses (each GPU's PCIe link and
// NVLinks, each InfiniBand/RoCE port and its NIC's PCIe link), read twice and judged by how they
// grew in between. A count since boot says little (the recorded healthy H100 shows 1 PCIe replay);
// a count that grows while the node works says the link is flaky now, and NCCL over it slows down
// or times out. The launch's health checks read them at the start, every round of the health watch
// and before a restart; `dtrain doctor --bandwidth` before and after its test, which loads the
// links.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "doctor/checks.h"
#include "doctor/node_facts.h"
#include "doctor/node_health.h"

namespace dtrain {

struct LinkCounter {
  std::string link;  // "GPU 3 PCIe", "GPU 3 NVLink 7", "mlx5_0/1", "mlx5_0 PCIe"
  // "replays", "replay rollovers" (a GPU's PCIe); "Replay Errors", "Recovery Errors", "CRC
  // Errors" (NVLink, as nvidia-smi names them); an InfiniBand port counter's sysfs name; "AER
  // correctable", "AER nonfatal", "AER fatal" (a NIC's PCIe).
  std::string counter;
  long long value = 0;
};

// The counters the probe could read on a node, GPUs first.
std::vector<LinkCounter> LinkCounters(const NodeHealth& health);

// Errors per minute above which a counting counter says its link is flaky: DCGM's limit for PCIe
// replays ("8 replays per minute is the maximum recommended by RM"), also used for a port's
// symbol, receive and link-integrity errors and a NIC's correctable PCIe errors. Over a reading
// shorter than a minute the count itself must pass it. NVLink's counters have DCGM's own limits:
// more than 1 replay error between two readings, more than 100 CRC errors a second.
constexpr double kLinkErrorsPerMinute = 8;

// A counter that grew past its limit between two readings. `event`: a counter of link
// retrainings, losses or uncorrectable errors (PCIe replay rollovers, NVLink recovery errors,
// link_error_recovery, link_downed, a NIC's non-fatal and fatal PCIe errors), where any growth
// counts.
struct LinkErrorGrowth {
  std::string link, counter;
  long long grown = 0;
  double per_minute = 0;
  bool event = false;
};

// The counters of `after` that grew past their limit since `before`, `seconds` apart. A counter
// that went down (a GPU reset, a reboot, a driver reload) or is missing from either reading is
// not judged.
std::vector<LinkErrorGrowth> FlakyLinks(const std::vector<LinkCounter>& before,
                                        const std::vector<LinkCounter>& after, double seconds);

// The finding ("link-errors") naming `host` and its flaky links, e.g. "node node1: link errors
// grew in 30 s: GPU 3 PCIe replays +240 (480/min); mlx5_0/1 link_downed +1 (went down and came
// back)": a warning, or `events` where a link retrained, went down or had an uncorrectable error.
Finding FlakyLinkFinding(const std::string& host, const std::vector<LinkErrorGrowth>& growth,
                         double seconds, Severity events = Severity::kWarning);

// Each node's last reading, for one launch (its start check, the health watch's rounds and the
// restart checks) or one doctor run; a link and counter is reported once. Thread-safe.
// `events`: the severity of a finding with a retraining, loss or uncorrectable error in it (an
// error in the doctor's bandwidth test, whose hostfile then leaves the node out; a warning in a
// running job, which goes on).
class LinkErrorWatch {
 public:
  explicit LinkErrorWatch(Severity events = Severity::kWarning) : events_(events) {}

  // `host`'s counters read at `at_s` (seconds on a steady clock) against its last reading: the
  // warning for the links not reported before, or nullopt (also on a first reading).
  std::optional<Finding> Update(const std::string& host, const std::vector<LinkCounter>& counters,
                                double at_s);
  // Each node of a probe run that the probe reached, read now: their warnings.
  std::vector<Finding> Update(const std::vector<NodeFacts>& nodes);

 private:
  struct Reading {
    double at_s = 0;
    std::vector<LinkCounter> counters;
  };
  Severity events_;
  std::mutex mutex_;
  std::map<std::string, Reading> last_;
  std::set<std::string> reported_;  // host, link and counter
};

}  // namespace dtrain
