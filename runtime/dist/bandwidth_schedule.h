// The arithmetic of the link bandwidth test (link_bandwidth.h), apart from LibTorch: which node
// pairs are measured together, and the bus bandwidth of an allreduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace dtrain::clip {

// Which node pairs meet in which round: the ring 0-1, 1-2, ..., (n-1)-0 cut into rounds in which
// no node appears twice (2 rounds for an even count, 3 for an odd one), so every node of 3 or
// more is measured against two different partners whatever n is. Two nodes: one pair; one: none.
std::vector<std::vector<std::pair<int, int>>> NodePairRounds(int nodes);

// The pairs (indexes into `pairs`) whose figure falls below half the reference, the median over
// nodes of each node's best pair: the ones measured again alone. The doctor judges with the same
// reference (doctor/bandwidth_verdict.h).
std::vector<size_t> SlowPairs(const std::vector<std::pair<int, int>>& pairs,
                              const std::vector<double>& busbw_gbs, int nodes);

// The slow pairs (SlowPairs) not yet measured alone. `busbw_gbs` holds each pair's figure alone
// where it has one: an alone figure can raise the reference and so put another pair below half
// of it, which is then measured alone too. Empty when every pair below half the reference has
// been measured alone, the figures the doctor judges.
std::vector<size_t> PairsToMeasureAlone(const std::vector<std::pair<int, int>>& pairs,
                                        const std::vector<double>& busbw_gbs, int nodes,
                                        const std::vector<bool>& measured_alone);

// nccl-tests' bus bandwidth of an allreduce: algbw * 2(n-1)/n, in GB/s (1e9 bytes).
double AllreduceBusBandwidth(int64_t bytes, double seconds_per_op, int ranks);

}  // namespace dtrain::clip
