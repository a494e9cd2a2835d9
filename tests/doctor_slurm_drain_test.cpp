// Which Slurm nodes `dtrain doctor --drain` drains and with what reason (doctor/slurm_drain.h):
// the nodes the launch would quarantine (here: one not reached, one whose GPU --compute found
// wrong), one line per machine, the reason on one line and cut at a character's start; never a
// node whose versions differ from the others'. Draining itself runs against the real Slurm
// (slurm_integration_drain_test.cpp).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/slurm_drain.h"

namespace dtrain {
namespace {

ClusterSpec Placed(const std::vector<std::pair<std::string, std::string>>& hosts) {
  ClusterSpec spec;
  spec.transport = TransportKind::kSlurm;
  for (const auto& [host, machine] : hosts) {
    NodeSpec node;
    node.host = host;
    node.machine = machine;
    spec.nodes.push_back(node);
  }
  return spec;
}

NodeFacts Reached(const std::string& host, const std::string& torch) {
  NodeFacts n;
  n.host = host;
  n.address = host;
  n.reached = true;
  n.torch = Version::Parse(torch).value();
  return n;
}

TEST(SlurmDrain, TheNodesALaunchWouldQuarantineNotThoseWhoseVersionsDiffer) {
  const ClusterSpec placed = Placed({{"a", "c001"}, {"b", "c002"}, {"c", "c003"}, {"d", "c004"}});
  ProbeRun run;
  run.nodes = {Reached("a", "2.4.0"), Reached("b", "2.3.1"), Reached("c", "2.4.0"),
               Reached("d", "2.4.0")};
  run.nodes[2].reached = false;  // c: not reached
  Finding wrong;
  wrong.severity = Severity::kError;
  wrong.check = "compute";
  wrong.nodes = {"d"};
  wrong.message = "node d: GPU 1 computes wrong results";
  // A pair that cannot connect names both nodes: neither is drained for it.
  Finding pair = wrong;
  pair.check = "peers";
  pair.nodes = {"a", "b"};
  pair.message = "the nodes a and b cannot connect";
  const auto unfit = UnfitToDrain(placed, run, {wrong, pair});
  EXPECT_EQ(unfit.count("a"), 0u);
  EXPECT_EQ(unfit.count("b"), 0u) << "torch 2.3.1 against 2.4.0 is the job's environment";
  // ... which the doctor's report does count as an error of node b's.
  EXPECT_EQ(ErrorsByNode(CheckCluster(placed, run)).count("b"), 1u);
  ASSERT_EQ(unfit.count("c"), 1u);
  ASSERT_EQ(unfit.count("d"), 1u);
  EXPECT_EQ(unfit.at("d"), "node d: GPU 1 computes wrong results");
  const std::vector<SlurmDrain> drain = PlanSlurmDrain(placed, unfit);
  ASSERT_EQ(drain.size(), 2u);
  EXPECT_EQ(drain[0].host, "c");
  EXPECT_EQ(drain[0].machine, "c003");
  EXPECT_EQ(drain[0].reason.rfind("dtrain doctor: ", 0), 0u) << drain[0].reason;
  EXPECT_EQ(drain[1].machine, "c004");
  EXPECT_EQ(drain[1].reason, "dtrain doctor: node d: GPU 1 computes wrong results");
}

TEST(SlurmDrain, OneLinePerMachineOnOneLineAndCutAtACharactersStart) {
  // Two names placed on one machine (a test cluster's), one without a machine (not placed).
  const ClusterSpec placed = Placed({{"a", "c001"}, {"b", "c001"}, {"c", ""}});
  std::string long_why = "node a: line one\nline\ttwo ";
  while (long_why.size() < 300) long_why += "é";  // two bytes each
  const auto drain = PlanSlurmDrain(placed, {{"a", long_why}, {"b", "node b"}, {"c", "node c"}});
  ASSERT_EQ(drain.size(), 1u);
  EXPECT_EQ(drain[0].host, "a");
  const std::string& reason = drain[0].reason;
  EXPECT_LE(reason.size(), kMaxDrainReason);
  EXPECT_EQ(reason.rfind("dtrain doctor: node a: line one line two é", 0), 0u) << reason;
  EXPECT_EQ(reason.substr(reason.size() - 5), "é...") << "no half character before the dots";
  EXPECT_EQ(reason.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace dtrain
