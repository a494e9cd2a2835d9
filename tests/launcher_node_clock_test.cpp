// The launch-time clock estimator on synthetic pings with a known offset: the sample with the
// smallest round trip wins, and its estimate is off by half the asymmetry of its two legs.
#include "launcher/node_clock.h"

#include <gtest/gtest.h>

namespace dtrain {
namespace {

// A ping sent at `sent` on the launcher's clock to a node whose clock reads the launcher's
// minus `offset`, `out` µs on the way there and `back` µs on the way back.
ClockSample Ping(int64_t sent, int64_t offset, int64_t out, int64_t back) {
  return {sent, sent + out - offset, sent + out + back};
}

TEST(NodeClock, SmallestRoundTripWinsAndIsOffByHalfItsAsymmetry) {
  const int64_t offset = -5000000;  // the node runs 5 s ahead
  const int64_t t = 1790857026000000;
  std::vector<ClockSample> samples = {Ping(t, offset, 9000, 200),  // the shell still starting
                                      Ping(t + 10000, offset, 300, 2500),
                                      Ping(t + 20000, offset, 100, 120),  // the best
                                      Ping(t + 30000, offset, 150, 400)};
  NodeClock clock;
  ASSERT_TRUE(EstimateNodeClock(samples, clock));
  EXPECT_EQ(clock.rtt_us, 220);
  EXPECT_EQ(clock.offset_us, offset + 10);  // (back - out) / 2
  EXPECT_LE(std::abs(clock.offset_us - offset), clock.rtt_us / 2);
}

TEST(NodeClock, SymmetricLegsGiveTheOffsetExactly) {
  NodeClock clock;
  ASSERT_TRUE(EstimateNodeClock({Ping(1000000, 1234567, 80, 80)}, clock));
  EXPECT_EQ(clock.offset_us, 1234567);
  EXPECT_EQ(clock.rtt_us, 160);
}

TEST(NodeClock, NoUsableSampleIsNoEstimate) {
  NodeClock clock;
  EXPECT_FALSE(EstimateNodeClock({}, clock));
  // The launcher's clock stepped back between send and receive.
  EXPECT_FALSE(EstimateNodeClock({{2000, 1500, 1000}}, clock));
}

TEST(NodeClock, ALocalClusterHasOneClock) {
  ClusterSpec spec;
  spec.transport = TransportKind::kLocal;
  spec.nodes.push_back(NodeSpec{});
  spec.nodes.back().host = "localhost";
  std::vector<std::string> warnings;
  std::map<std::string, NodeClock> clocks = MeasureNodeClocks(spec, warnings);
  ASSERT_EQ(clocks.size(), 1u);
  EXPECT_EQ(clocks["localhost"].offset_us, 0);
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace dtrain
