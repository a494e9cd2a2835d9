// How far each node's wall clock is from the launching machine's, measured at launch so that
// traces stamped with a node's own clock (PyTorch profiler's baseTimeNanoseconds) can be put on
// the launcher's. NTP-style: the launcher sends a few pings over the node's ssh connection, the
// node answers each with its wall clock in µs, and the ping with the smallest round trip wins.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

// Sign convention: offset_us = the launcher's clock minus the node's. A node running 5 s ahead
// has -5000000; a node's timestamp plus offset_us is the launcher's time. The estimate is off
// by at most rtt_us / 2 (the round trip it came from; 0 for this machine's own clock).
struct NodeClock {
  int64_t offset_us = 0;
  int64_t rtt_us = 0;
};

// One ping: the launcher's wall clock when it was sent and when the answer came back, and the
// node's wall clock in the answer (all µs since the Unix epoch).
struct ClockSample {
  int64_t sent_us = 0;
  int64_t remote_us = 0;
  int64_t received_us = 0;
};

// The best-of-N estimate: the sample with the smallest round trip, offset from the midpoint of
// its send and receive times. False when there is no usable sample (none, or received < sent).
bool EstimateNodeClock(const std::vector<ClockSample>& samples, NodeClock& clock);

constexpr int kDefaultClockPings = 8;

// What each ssh node runs to be measured: a loop that answers every line on its stdin with the
// node's wall clock as seconds.micros, and ends at EOF, or once no line came for `limit_s`
// seconds (with bash 5; else `limit_s` after its start, where the node has timeout(1)).
std::vector<std::string> NodeClockCommand(int limit_s);

// Every node's clock by host: 0 for a local cluster (one clock), measured for ssh nodes in
// parallel (`pings` round trips each, well under a second once logged in), nothing for Slurm. It
// gives up after the connect timeout (the logins) and 1.5 s more, or once `stop` is set. A node
// that cannot be reached in that time or answers nonsense is left out and said in `warnings`.
std::map<std::string, NodeClock> MeasureNodeClocks(const ClusterSpec& spec,
                                                   std::vector<std::string>& warnings,
                                                   int pings = kDefaultClockPings,
                                                   const std::atomic<bool>* stop = nullptr);

// MeasureNodeClocks on a thread of its own, so that the launch goes on meanwhile: the ranks start
// at once, and a node that cannot be reached costs its connect timeout once, not twice. Take()
// gives what has not answered yet 1.5 s more, then stops it; the destructor stops it at once. The
// thread blocks every signal: Ctrl-C stays with the launcher's supervisor.
class NodeClockProbe {
 public:
  explicit NodeClockProbe(const ClusterSpec& spec);
  ~NodeClockProbe();  // stops the measurement and waits for its thread
  NodeClockProbe(const NodeClockProbe&) = delete;
  NodeClockProbe& operator=(const NodeClockProbe&) = delete;

  // Waits up to 1.5 s for the measurement, stops what still waits and hands over the result;
  // empty on a second call.
  std::map<std::string, NodeClock> Take(std::vector<std::string>& warnings);

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;
  std::map<std::string, NodeClock> clocks_;
  std::vector<std::string> warnings_;
};

}  // namespace dtrain
