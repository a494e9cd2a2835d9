// `dtrain doctor --bandwidth`'s verdict: the figures dtrain-clip prints, parsed, and which node
// or link is named slow (a slow node, a slow link, nothing slow, too few nodes to tell).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/bandwidth_verdict.h"

namespace dtrain {
namespace {

BandwidthFigure Pair(int a, int b, double gbs) {
  BandwidthFigure f;
  f.kind = "pair";
  f.nodes = {a, b};
  f.ranks = 2;
  f.backend = "gloo";
  f.bytes = 8 << 20;
  f.busbw_gbs = gbs;
  return f;
}

BandwidthFigure Inside(int node, double gbs) {
  BandwidthFigure f = Pair(node, node, gbs);
  f.kind = "node";
  f.nodes = {node};
  f.ranks = 8;
  return f;
}

// The ring's pairs for 4 nodes, as dtrain-clip measures them, with `slow` (if >= 0) on 25 MB/s.
std::vector<BandwidthFigure> RingOfFour(int slow) {
  std::vector<BandwidthFigure> out;
  const double fast[] = {1.9, 2.1, 1.7, 2.3};
  for (int i = 0; i < 4; ++i) {
    const int a = std::min(i, (i + 1) % 4), b = std::max(i, (i + 1) % 4);
    out.push_back(Pair(a, b, (a == slow || b == slow) ? 0.025 : fast[i]));
  }
  return out;
}

const std::vector<std::string> kHosts = {"node0", "node1", "node2", "node3"};

std::string Errors(const BandwidthVerdict& v) {
  std::string out;
  for (const Finding& f : v.findings) {
    if (f.severity == Severity::kError) out += f.message + "\n";
  }
  return out;
}

TEST(DoctorBandwidth, ParsesTheFiguresDtrainClipPrints) {
  const std::string log =
      "dtrain-bandwidth-rank {\"rank\":0,\"node\":0,\"host\":\"node0\"}\n"
      "some other line\n"
      "dtrain-bandwidth {\"kind\":\"all\",\"nodes\":[0,1,2],\"ranks\":3,\"backend\":\"gloo\","
      "\"bytes\":8388608,\"seconds\":0.010000,\"algbw_gbs\":0.838861,\"busbw_gbs\":1.118481}\n"
      "dtrain-bandwidth {\"kind\":\"pair\",\"nodes\":[0,1],\"ranks\":2,\"backend\":\"gloo\","
      "\"bytes\":8388608,\"seconds\":0.020000,\"algbw_gbs\":0.419430,\"busbw_gbs\":0.419430}";
  std::vector<BandwidthFigure> f = ParseBandwidthLines(log);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, "all");
  EXPECT_EQ(f[0].nodes, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(f[0].ranks, 3);
  EXPECT_DOUBLE_EQ(f[0].busbw_gbs, 1.118481);
  EXPECT_EQ(f[1].kind, "pair");
  EXPECT_EQ(f[1].bytes, 8388608);
  EXPECT_THROW(ParseBandwidthLines("dtrain-bandwidth {\"kind\":\"pair\""), std::runtime_error);
}

TEST(DoctorBandwidth, NamesTheSlowNodeAndOnlyIt) {
  BandwidthVerdict v = JudgeBandwidth(RingOfFour(2), kHosts);
  EXPECT_EQ(v.slow_nodes, std::vector<int>{2}) << Errors(v);
  EXPECT_TRUE(v.slow_links.empty()) << Errors(v);
  const std::string errors = Errors(v);
  EXPECT_NE(errors.find("node node2 is slow"), std::string::npos) << errors;
  EXPECT_EQ(errors.find("node1 is slow"), std::string::npos) << errors;
  EXPECT_EQ(errors.find("node3 is slow"), std::string::npos) << errors;
}

TEST(DoctorBandwidth, NamesNothingWhenEveryPairIsFast) {
  BandwidthVerdict v = JudgeBandwidth(RingOfFour(-1), kHosts);
  EXPECT_TRUE(v.slow_nodes.empty());
  EXPECT_TRUE(v.slow_links.empty());
  EXPECT_EQ(Errors(v), "");
  EXPECT_NEAR(v.reference_gbs, 2.2, 1e-9);  // best per node: 2.3, 1.9, 2.1, 2.3 -> median 2.2
}

TEST(DoctorBandwidth, ASingleSlowPairIsALink) {
  std::vector<BandwidthFigure> f = RingOfFour(-1);
  f[1].busbw_gbs = 0.1;  // node1-node2 only
  BandwidthVerdict v = JudgeBandwidth(f, kHosts);
  EXPECT_TRUE(v.slow_nodes.empty()) << Errors(v);
  ASSERT_EQ(v.slow_links.size(), 1u) << Errors(v);
  EXPECT_EQ(v.slow_links[0], (std::pair<int, int>{1, 2}));
  EXPECT_NE(Errors(v).find("the link between node1 and node2 is slow"), std::string::npos);
}

TEST(DoctorBandwidth, APairFastWhenMeasuredAloneIsNotSlow) {
  // node1-node2 slow in its round (the machine was busy) but fast alone: nothing is named. node2's
  // pairs with the throttled node 3 stay slow alone.
  std::vector<BandwidthFigure> f = RingOfFour(-1);
  f[1].busbw_gbs = 0.1;
  BandwidthFigure again = Pair(1, 2, 1.95);
  again.kind = "pair_alone";
  f.push_back(again);
  BandwidthVerdict v = JudgeBandwidth(f, kHosts);
  EXPECT_TRUE(v.slow_links.empty()) << Errors(v);
  EXPECT_TRUE(v.slow_nodes.empty()) << Errors(v);
  std::vector<BandwidthFigure> g = RingOfFour(2);
  BandwidthFigure still = Pair(1, 2, 0.024);
  still.kind = "pair_alone";
  g.push_back(still);
  EXPECT_EQ(JudgeBandwidth(g, kHosts).slow_nodes, std::vector<int>{2});
}

TEST(DoctorBandwidth, ASlowNodeAmongThreeIsNamed) {
  // Three nodes: pairs 0-1, 1-2, 0-2; node 0 slow makes two of three pairs slow, so the median of
  // the pairs would be slow too; each node's best partner keeps the reference fast.
  std::vector<BandwidthFigure> f = {Pair(0, 1, 0.02), Pair(1, 2, 2.0), Pair(0, 2, 0.03)};
  BandwidthVerdict v = JudgeBandwidth(f, kHosts);
  EXPECT_EQ(v.slow_nodes, std::vector<int>{0}) << Errors(v);
  EXPECT_TRUE(v.slow_links.empty());
}

TEST(DoctorBandwidth, TwoNodesCannotTellNodeFromLink) {
  BandwidthVerdict v = JudgeBandwidth({Pair(0, 1, 0.02)}, kHosts);
  EXPECT_TRUE(v.slow_nodes.empty());
  EXPECT_TRUE(v.slow_links.empty());  // one pair is its own reference
}

TEST(DoctorBandwidth, ASlowInsideOfANodeIsNamed) {
  BandwidthVerdict v =
      JudgeBandwidth({Inside(0, 350), Inside(1, 360), Inside(2, 40), Inside(3, 355)}, kHosts);
  EXPECT_EQ(v.slow_inside, std::vector<int>{2});
  EXPECT_NE(Errors(v).find("node node2: its 8 ranks reach each other at 40.00 GB/s"),
            std::string::npos)
      << Errors(v);
}

}  // namespace
}  // namespace dtrain
