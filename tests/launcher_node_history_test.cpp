// Earlier jobs' quarantines read back from a log dir, and the nodes they hold back as spares
// (launcher/node_history.h), on job records written as dtrain writes them.
#include "launcher/node_history.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <filesystem>
#include <fstream>

#include "launcher/job_record.h"
#include "launcher/rank_log.h"
#include "tests/support/files.h"

namespace dtrain {
namespace {

constexpr int64_t kHour = int64_t{3600} * 1000000;

NodeSpec Node(const std::string& host, bool spare = false) {
  NodeSpec n;
  n.host = host;
  n.spare = spare;
  return n;
}

// A job record in `log_dir`/`name` that ended at `ended_us` (0: still running) with `quarantined`.
void WriteJob(const std::string& log_dir, const std::string& name, int64_t ended_us,
              const std::map<std::string, std::string>& quarantined) {
  std::filesystem::create_directories(log_dir + "/" + name);
  JobRecord record;
  record.name = name;
  record.status = ended_us ? "succeeded" : "running";
  record.started_us = ended_us ? ended_us - kHour / 60 : 1;
  record.ended_us = ended_us;
  record.quarantined = quarantined;
  for (const auto& [host, why] : quarantined) record.nodes.push_back(Node(host));
  record.nodes.push_back(Node("healthy"));
  WriteJobRecord(log_dir + "/" + name, record);
}

std::vector<NodeSpec> Nodes(const std::vector<std::string>& hosts, int spares) {
  std::vector<NodeSpec> nodes;
  for (const std::string& host : hosts)
    nodes.push_back(Node(host, static_cast<int>(hosts.size() - nodes.size()) <= spares));
  return nodes;
}

TEST(NodeHistory, TheNewestQuarantineOfEachNodeWithinTheWindow) {
  testing::TempDir dir;
  const int64_t now = int64_t{1790000000} * 1000000;
  WriteJob(dir.path(), "a", now - 2 * kHour, {{"node1", "node node1 lost: no answer for 10 s"}});
  WriteJob(dir.path(), "b", now - kHour / 2,
           {{"node1", "failed the health watch: Xid 79"}, {"node2", "a straggler"}});
  WriteJob(dir.path(), "old", now - 72 * kHour, {{"node3", "lost"}});
  WriteJob(dir.path(), "running", 0, {{"node4", "could not be reached at the start"}});
  std::filesystem::create_directories(dir.path() + "/broken");
  testing::WriteFile(dir.path() + "/broken/job.json", "{\"job\": ");
  std::filesystem::create_directories(dir.path() + "/empty");
  std::filesystem::create_directory_symlink("b", dir.path() + "/latest");

  // The running job's record was last written now (its mtime): it counts.
  auto recent = RecentQuarantines(dir.path(), 24 * 3600, WallMicros());
  ASSERT_EQ(recent.count("node4"), 1u);
  EXPECT_EQ(recent["node4"].job, "running");
  // Against a clock where the others ended: node1's newest is job b's, node3's is too old.
  recent = RecentQuarantines(dir.path(), 24 * 3600, now);
  EXPECT_EQ(recent["node1"].job, "b");
  EXPECT_EQ(recent["node1"].why, "failed the health watch: Xid 79");
  EXPECT_EQ(recent["node1"].when_us, now - kHour / 2);
  EXPECT_EQ(recent["node2"].job, "b");
  EXPECT_EQ(recent.count("node3"), 0u);
  // A window of one hour leaves job a out, of nothing everything.
  recent = RecentQuarantines(dir.path(), 3600, now);
  EXPECT_EQ(recent["node1"].job, "b");
  EXPECT_TRUE(RecentQuarantines(dir.path(), 0, now).empty());
  // A window past the epoch reaches every record.
  EXPECT_EQ(RecentQuarantines(dir.path(), 1e30, now).count("node3"), 1u);
  EXPECT_TRUE(RecentQuarantines(dir.path() + "/none", 3600, now).empty());
}

// A node quarantined again is held back longer: the window doubled for each job that quarantined
// it within 8 windows, 8 windows at most.
TEST(NodeHistory, ANodeQuarantinedByMoreJobsIsHeldBackLonger) {
  testing::TempDir dir;
  const int64_t now = int64_t{1790000000} * 1000000;
  const int64_t minute = kHour / 60;
  // node1: three jobs within the 8 hours, the newest 90 min ago; held back 4 h.
  WriteJob(dir.path(), "a", now - 7 * kHour, {{"node1", "lost"}, {"node3", "lost"}});
  WriteJob(dir.path(), "b", now - 5 * kHour, {{"node1", "lost"}});
  WriteJob(dir.path(), "c", now - 90 * minute, {{"node1", "failed the health watch: Xid 79"}});
  // node2: one job, 90 min ago: past the hour.
  WriteJob(dir.path(), "d", now - 90 * minute, {{"node2", "a straggler"}});
  // node3: job a, 7 h ago, and one 9 h ago, past the 8 hours: one job, an hour, over.
  WriteJob(dir.path(), "e", now - 9 * kHour, {{"node3", "lost"}});
  // node4: four jobs, the newest 7 h 36 min ago: held back 8 h, the most.
  WriteJob(dir.path(), "f", now - 7 * kHour - 54 * minute, {{"node4", "Xid 79"}});
  WriteJob(dir.path(), "g", now - 7 * kHour - 48 * minute, {{"node4", "Xid 79"}});
  WriteJob(dir.path(), "h", now - 7 * kHour - 42 * minute, {{"node4", "Xid 79"}});
  WriteJob(dir.path(), "i", now - 7 * kHour - 36 * minute, {{"node4", "Xid 79"}});

  auto recent = RecentQuarantines(dir.path(), 3600, now);
  ASSERT_EQ(recent.count("node1"), 1u);
  EXPECT_EQ(recent["node1"].job, "c");
  EXPECT_EQ(recent["node1"].jobs, 3);
  EXPECT_EQ(recent["node1"].held_s, 4 * 3600);
  EXPECT_EQ(DescribePastQuarantine(recent["node1"], now),
            "job c quarantined it 90 min ago, the 3rd job to do so within 8 h (held back 4 h, "
            "not 60 min): failed the health watch: Xid 79");
  EXPECT_EQ(recent.count("node2"), 0u);
  EXPECT_EQ(recent.count("node3"), 0u);
  ASSERT_EQ(recent.count("node4"), 1u);
  EXPECT_EQ(recent["node4"].jobs, 4);
  EXPECT_EQ(recent["node4"].held_s, 8 * 3600);
  // 25 minutes on, node4's 8 hours are over; node1's 4 are not.
  recent = RecentQuarantines(dir.path(), 3600, now + 25 * minute);
  EXPECT_EQ(recent.count("node4"), 0u);
  EXPECT_EQ(recent.count("node1"), 1u);
  // A node quarantined once is held back the window, as before, and said as before.
  recent = RecentQuarantines(dir.path(), 2 * 3600, now);
  ASSERT_EQ(recent.count("node2"), 1u);
  EXPECT_EQ(recent["node2"].jobs, 1);
  EXPECT_EQ(DescribePastQuarantine(recent["node2"], now),
            "job d quarantined it 90 min ago: a straggler");

  EXPECT_EQ(GrownHoldBack(3600, 1), 3600);
  EXPECT_EQ(GrownHoldBack(3600, 2), 7200);
  EXPECT_EQ(GrownHoldBack(3600, 11), 8 * 3600);
  EXPECT_EQ(GrownHoldBack(1e30, 3), 4e30);
  PastQuarantine many{"j", "lost", now - kHour, 11, 3600, GrownHoldBack(3600, 11)};
  EXPECT_EQ(DescribePastQuarantine(many, now),
            "job j quarantined it 60 min ago, the 11th job to do so within 8 h (held back 8 h, "
            "not 60 min): lost");
  many.jobs = 22;
  EXPECT_NE(DescribePastQuarantine(many, now).find("the 22nd job"), std::string::npos);
}

TEST(NodeHistory, ARecordNotWrittenWithinTheWindowIsNotRead) {
  testing::TempDir dir;
  WriteJob(dir.path(), "running", 0, {{"node1", "lost"}});
  const std::string path = dir.path() + "/running/job.json";
  struct timeval old[2] = {{1000, 0}, {1000, 0}};  // 1970: a launcher that died long ago
  ASSERT_EQ(::utimes(path.c_str(), old), 0);
  EXPECT_TRUE(RecentQuarantines(dir.path(), 24 * 3600, WallMicros()).empty());
}

TEST(NodeHistory, NodesQuarantinedBeforeAreHeldBackWhileACleanSpareTakesTheirPlace) {
  std::vector<NodeSpec> nodes = Nodes({"n0", "n1", "n2", "s3", "s4"}, 2);
  std::map<std::string, PastQuarantine> recent = {{"n1", {"a", "lost", 0, 1, 0, 0}},
                                                  {"s3", {"a", "unfit", 0, 1, 0, 0}}};
  std::vector<HeldBack> held = HoldBackRecentlyQuarantined(nodes, recent);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].host, "n1");
  EXPECT_EQ(held[0].spare, "s4");  // s3 was quarantined too: it stays a spare
  std::vector<bool> spare;
  for (const NodeSpec& n : nodes) spare.push_back(n.spare);
  EXPECT_EQ(spare, (std::vector<bool>{false, true, false, true, false}));

  // More held back than clean spares: the last one runs, and says so.
  nodes = Nodes({"n0", "n1", "n2", "s3"}, 1);
  recent = {{"n0", {"a", "lost", 0, 1, 0, 0}}, {"n2", {"b", "a straggler", 0, 1, 0, 0}}};
  held = HoldBackRecentlyQuarantined(nodes, recent);
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0].spare, "s3");
  EXPECT_EQ(held[1].host, "n2");
  EXPECT_EQ(held[1].spare, "");
  EXPECT_TRUE(nodes[0].spare);
  EXPECT_FALSE(nodes[2].spare);
  EXPECT_FALSE(nodes[3].spare);
  EXPECT_EQ(DescribeHeldBack(held[0], 12 * 60 * 1000000LL),
            "node n0 held back as a spare (s3 runs in its place): job a quarantined it 12 min "
            "ago: lost");
  EXPECT_EQ(DescribeHeldBack(held[1], 3 * kHour),
            "node n2 runs though job b quarantined it 3 h ago: a straggler; no spare that no "
            "recent job quarantined can take its place");
}

TEST(NodeHistory, OnlySshNodesAreHeldBack) {
  testing::TempDir dir;
  WriteJob(dir.path(), "a", WallMicros(), {{"n1", "lost"}});
  ClusterSpec spec;
  spec.nodes = Nodes({"n0", "n1", "s2"}, 1);
  spec.transport = TransportKind::kSlurm;  // a name labels whichever machine Slurm gives
  EXPECT_TRUE(PlanHoldBack(spec, dir.path(), 3600, WallMicros()).ssh_nodes.empty());
  spec.transport = TransportKind::kSsh;
  EXPECT_TRUE(PlanHoldBack(spec, dir.path(), 0, WallMicros()).ssh_nodes.empty());
  ASSERT_EQ(PlanHoldBack(spec, dir.path(), 3600, WallMicros()).ssh_nodes.size(), 1u);
  EXPECT_TRUE(spec.nodes[1].spare);
  EXPECT_FALSE(spec.nodes[2].spare);
}

// A Slurm job's record: node `host` ran on Slurm node `machine` and was quarantined.
void WriteSlurmJob(const std::string& log_dir, const std::string& name, int64_t ended_us,
                   const std::string& host, const std::string& machine) {
  std::filesystem::create_directories(log_dir + "/" + name);
  JobRecord record;
  record.name = name;
  record.status = "succeeded";
  record.transport = "slurm";
  record.started_us = ended_us - kHour / 60;
  record.ended_us = ended_us;
  record.quarantined[host] = "node " + host + " lost";
  NodeSpec node = Node(host);
  node.machine = machine;
  record.nodes.push_back(node);
  WriteJobRecord(log_dir + "/" + name, record);
}

TEST(NodeHistory, SlurmNodesAreTheMachinesTheQuarantinedNodesRanOn) {
  testing::TempDir dir;
  const int64_t now = WallMicros();
  WriteSlurmJob(dir.path(), "first", now - 2 * kHour, "b", "c042");
  WriteSlurmJob(dir.path(), "second", now - kHour, "a", "c042");  // a name labels a placement
  WriteSlurmJob(dir.path(), "third", now - kHour / 2, "b", "c007");
  WriteJob(dir.path(), "ssh", now - kHour / 2, {{"node1", "lost"}});  // no machine: not Slurm
  const auto recent = RecentlyQuarantinedSlurmNodes(dir.path(), 24 * 3600, now);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent.at("c042").job, "second");
  EXPECT_EQ(recent.at("c007").job, "third");
  ClusterSpec spec;
  spec.transport = TransportKind::kSlurm;
  spec.nodes = Nodes({"a", "b"}, 0);
  const HoldBackPlan plan = PlanHoldBack(spec, dir.path(), 24 * 3600, now);
  EXPECT_TRUE(plan.ssh_nodes.empty());
  EXPECT_EQ(plan.SlurmNodeNames(), (std::vector<std::string>{"c007", "c042"}));
  EXPECT_TRUE(PlanHoldBack(spec, dir.path(), 0, now).slurm_nodes.empty());
  spec.transport = TransportKind::kSsh;
  EXPECT_TRUE(PlanHoldBack(spec, dir.path(), 24 * 3600, now).slurm_nodes.empty());
}

TEST(NodeHistory, WhatBecameOfASlurmNodeIsSaidAsItHappened) {
  const PastQuarantine past{"lost", "node b lost: no answer for 3 s", 0, 1, 0, 0};
  const int64_t now = 40 * 1000000LL;
  EXPECT_EQ(DescribeSlurmHoldBack("c042", past, false, true, false, now),
            "Slurm node c042 left out of this job (sbatch --exclude): job lost quarantined it "
            "40 s ago: node b lost: no answer for 3 s");
  EXPECT_EQ(DescribeSlurmHoldBack("c042", past, true, false, false, now),
            "Slurm node c042 runs in this job though job lost quarantined it 40 s ago: node b "
            "lost: no answer for 3 s; Slurm refused the batch job without it");
  EXPECT_EQ(DescribeSlurmHoldBack("c042", past, false, false, true, now),
            "Slurm node c042 of the allocation left unused: job lost quarantined it 40 s ago: "
            "node b lost: no answer for 3 s");
  EXPECT_NE(DescribeSlurmHoldBack("c042", past, true, false, true, now)
                .find("; the allocation has no other node to take its place"),
            std::string::npos);
  // Refused the exclusion, and Slurm gave other nodes anyway; or outside the caller's allocation.
  EXPECT_EQ(DescribeSlurmHoldBack("c042", past, false, false, false, now), "");
  EXPECT_EQ(DescribeSlurmNodeGone("c042", past, now),
            "Slurm node c042 is not left out of this job: Slurm has no such node now (sinfo), "
            "though job lost quarantined it 40 s ago: node b lost: no answer for 3 s");
}

}  // namespace
}  // namespace dtrain
