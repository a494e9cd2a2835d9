#include "runtime/dist/bandwidth_schedule.h"

#include <algorithm>

namespace dtrain::clip {

std::vector<std::vector<std::pair<int, int>>> NodePairRounds(int nodes) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (nodes < 2) return rounds;
  if (nodes == 2) return {{{0, 1}}};
  // Edge i joins i and i+1 (mod n). Even n: even edges, then odd ones. Odd n: the even edges up
  // to n-3, the odd ones, then the closing edge (n-1, 0) alone.
  std::vector<std::pair<int, int>> even, odd, closing;
  for (int i = 0; i < nodes; ++i) {
    std::pair<int, int> edge{std::min(i, (i + 1) % nodes), std::max(i, (i + 1) % nodes)};
    if (nodes % 2 == 1 && i == nodes - 1) {
      closing.push_back(edge);
    } else {
      (i % 2 == 0 ? even : odd).push_back(edge);
    }
  }
  rounds.push_back(even);
  rounds.push_back(odd);
  if (!closing.empty()) rounds.push_back(closing);
  return rounds;
}

std::vector<size_t> SlowPairs(const std::vector<std::pair<int, int>>& pairs,
                              const std::vector<double>& busbw_gbs, int nodes) {
  std::vector<double> best(static_cast<size_t>(std::max(nodes, 0)), -1);
  for (size_t i = 0; i < pairs.size() && i < busbw_gbs.size(); ++i) {
    for (int n : {pairs[i].first, pairs[i].second}) {
      if (n >= 0 && n < nodes) best[n] = std::max(best[n], busbw_gbs[i]);
    }
  }
  std::vector<double> measured;
  for (double b : best) {
    if (b >= 0) measured.push_back(b);
  }
  std::vector<size_t> slow;
  if (measured.empty()) return slow;
  std::sort(measured.begin(), measured.end());
  const size_t mid = measured.size() / 2;
  const double reference =
      measured.size() % 2 ? measured[mid] : (measured[mid - 1] + measured[mid]) / 2;
  for (size_t i = 0; i < pairs.size() && i < busbw_gbs.size(); ++i) {
    if (busbw_gbs[i] < reference / 2) slow.push_back(i);
  }
  return slow;
}

std::vector<size_t> PairsToMeasureAlone(const std::vector<std::pair<int, int>>& pairs,
                                        const std::vector<double>& busbw_gbs, int nodes,
                                        const std::vector<bool>& measured_alone) {
  std::vector<size_t> out;
  for (size_t i : SlowPairs(pairs, busbw_gbs, nodes)) {
    if (i >= measured_alone.size() || !measured_alone[i]) out.push_back(i);
  }
  return out;
}

double AllreduceBusBandwidth(int64_t bytes, double seconds_per_op, int ranks) {
  if (seconds_per_op <= 0 || ranks < 1) return 0;
  const double algbw = static_cast<double>(bytes) / seconds_per_op / 1e9;
  return algbw * 2.0 * (ranks - 1) / ranks;
}

}  // namespace dtrain::clip
