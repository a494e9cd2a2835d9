// The link bandwidth test's schedule: every pair a ring edge, no node twice in a round, every node
// of three or more measured against two different partners; and nccl-tests' bus bandwidth.
#include "runtime/dist/bandwidth_schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

namespace dtrain::clip {
namespace {

TEST(BandwidthSchedule, RoundsCoverTheRingWithNoNodeTwiceInARound) {
  for (int n = 3; n <= 65; ++n) {
    const auto rounds = NodePairRounds(n);
    EXPECT_EQ(rounds.size(), n % 2 == 0 ? 2u : 3u) << n;
    std::set<std::pair<int, int>> seen;
    std::map<int, std::set<int>> partners;
    for (const auto& round : rounds) {
      std::set<int> busy;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_TRUE(busy.insert(a).second) << n << ": node " << a << " twice in a round";
        EXPECT_TRUE(busy.insert(b).second) << n << ": node " << b << " twice in a round";
        EXPECT_TRUE(b == a + 1 || (a == 0 && b == n - 1)) << n << ": " << a << "-" << b;
        seen.insert({a, b});
        partners[a].insert(b);
        partners[b].insert(a);
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(n)) << n;  // every ring edge once
    for (int node = 0; node < n; ++node) EXPECT_EQ(partners[node].size(), 2u) << n << " " << node;
  }
  EXPECT_EQ(NodePairRounds(2), (std::vector<std::vector<std::pair<int, int>>>{{{0, 1}}}));
  EXPECT_TRUE(NodePairRounds(1).empty());
}

TEST(BandwidthSchedule, PairsBelowHalfTheReferenceAreMeasuredAgain) {
  // Ring of 4; node 2's pairs (1-2, 2-3) slow. Best per node: 2.0, 2.0, 0.03, 1.8 -> median 1.9.
  const std::vector<std::pair<int, int>> pairs = {{0, 1}, {2, 3}, {1, 2}, {0, 3}};
  EXPECT_EQ(SlowPairs(pairs, {2.0, 0.03, 0.02, 1.8}, 4), (std::vector<size_t>{1, 2}));
  EXPECT_TRUE(SlowPairs(pairs, {2.0, 1.5, 1.9, 1.8}, 4).empty());
  EXPECT_TRUE(SlowPairs({}, {}, 0).empty());
}

TEST(BandwidthSchedule, APairPutBelowHalfByAnAloneFigureIsMeasuredAloneToo) {
  // Figures of an unthrottled 4-node run on a loaded 2-core machine. Best per node: 1.30, 1.30,
  // 0.67, 0.52 -> reference 0.99: only 0-3 (0.48) is below half of it.
  const std::vector<std::pair<int, int>> pairs = {{0, 1}, {2, 3}, {1, 2}, {0, 3}};
  std::vector<double> figures = {1.30, 0.52, 0.67, 0.48};
  std::vector<bool> alone(4, false);
  EXPECT_EQ(PairsToMeasureAlone(pairs, figures, 4, alone), (std::vector<size_t>{3}));
  // 0-3 alone: 0.93. Node 3's best rises, the reference with it (1.11), and 2-3 (0.52) is now
  // below half: it is measured alone as well; 0-3 is not measured twice.
  figures[3] = 0.93;
  alone[3] = true;
  EXPECT_EQ(PairsToMeasureAlone(pairs, figures, 4, alone), (std::vector<size_t>{1}));
  figures[1] = 0.90;
  alone[1] = true;
  EXPECT_TRUE(PairsToMeasureAlone(pairs, figures, 4, alone).empty());
  // A pair slow alone stays slow and is not measured again.
  figures[1] = 0.02;
  EXPECT_TRUE(PairsToMeasureAlone(pairs, figures, 4, alone).empty());
}

TEST(BandwidthSchedule, BusBandwidthIsNcclTestsDefinition) {
  // 1 GB in 1 s over 8 ranks: algbw 1 GB/s, busbw 2*7/8.
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(1000000000, 1.0, 8), 1.75);
  EXPECT_DOUBLE_EQ(AllreduceBusBandwidth(500000000, 1.0, 2), 0.5);
  EXPECT_EQ(AllreduceBusBandwidth(100, 0, 2), 0);
}

}  // namespace
}  // namespace dtrain::clip
