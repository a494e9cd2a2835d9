// What `dtrain doctor --bandwidth` concludes from the figures `dtrain-clip bandwidth` printed:
// the allreduce bus bandwidth of all nodes, then which node or link is slow. A node is slow when
// every pair it took part in (at least two, with different partners) fell below `slow_fraction`
// of the reference; a slow pair whose two nodes are not slow is a slow link. The reference is
// the median over nodes of each node's best pair, so one slow node cannot drag it down. A pair
// that was measured again alone (below half the reference in its round) is judged by that figure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/checks.h"

namespace dtrain {

struct BandwidthFigure {
  std::string kind;  // "all", "node" (within one node), "pair", "pair_alone" (measured again alone)
  std::vector<int> nodes;  // node indexes in the job's order
  int ranks = 0;
  std::string backend;  // gloo | nccl
  int64_t bytes = 0;
  double seconds = 0;    // per allreduce
  double busbw_gbs = 0;  // nccl-tests' bus bandwidth, GB/s
};

// The "dtrain-bandwidth {json}" lines of a rank's output; other lines are skipped. Throws
// std::runtime_error naming the line when one is damaged.
std::vector<BandwidthFigure> ParseBandwidthLines(std::string_view text);

struct BandwidthVerdict {
  double reference_gbs = 0;  // the median of each node's best pair (0: no pairs)
  std::vector<int> slow_nodes;
  std::vector<std::pair<int, int>> slow_links;
  std::vector<int> slow_inside;   // nodes whose ranks reach each other slowly (NVLink, PCIe)
  std::vector<Finding> findings;  // ok figures first, then what is slow
};

constexpr double kSlowFraction = 0.5;

// `hosts[i]` names node i.
BandwidthVerdict JudgeBandwidth(const std::vector<BandwidthFigure>& figures,
                                const std::vector<std::string>& hosts,
                                double slow_fraction = kSlowFraction);

}  // namespace dtrain
