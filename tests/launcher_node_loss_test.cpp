// Issue 27: a node dies, the job goes on. Real faults on sshd nodes in network namespaces: a
// node's link is cut (`ip link set eth0 down`) and stays cut. dtrain must name the node lost
// within --node-timeout + 1 s, stop the others, restart without it (a spare in its place, or
// fewer nodes with --nnodes MIN:MAX), resume from the job's checkpoint file and finish; the cut
// node's rank must end by itself (its dead-man switch) while the link is still down.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/dtrain_process.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/killed_after_step_seven.h"
#include "tests/support/nvidia_smi_fixture.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using test::ReadText;
using test::SshTestCluster;
using testing::DtrainProcess;

constexpr double kNodeTimeout = 3;
constexpr const char* kNodeTimeoutArg = "3";
constexpr double kGrace = 2;

// Each rank counts steps from the job's checkpoint file (rank 0 writes it after every step) to
// 40, a step every 0.25 s; rank 0 also writes a metrics line per step. `nodeloss-rank` marks the
// rank's processes on its node. Cut at step 4, the cut node's rank would run 9 s more on its
// own: longer than the node timeout, a sample of its dead-man switch and the grace period.
const char* kRankScript = R"sh(
ck=$DTRAIN_LOG_DIR/checkpoint
s=0; [ -f "$ck" ] && s=$(cat "$ck")
echo "rank $RANK of $WORLD_SIZE on $DTRAIN_NODE starts at step $s"
mkdir -p "$DTRAIN_LOG_DIR/metrics"
while [ "$s" -lt 40 ]; do
  sleep 0.25; s=$((s + 1))
  if [ "$RANK" = 0 ]; then
    echo "$s" >"$ck.tmp" && mv "$ck.tmp" "$ck"
    echo "{\"step\": $s}" >>"$DTRAIN_LOG_DIR/metrics/rank-0.jsonl"
  fi
done
echo "rank $RANK done")sh";

int CheckpointStep(const std::string& job_dir) {
  const std::string text = ReadText(job_dir + "/checkpoint");
  return text.empty() ? -1 : std::atoi(text.c_str());
}

bool RankRunsOn(const SshTestCluster& cluster, int node) {
  for (const std::string& p : cluster.NodeProcesses(node)) {
    if (p.find("nodeloss-rank") != std::string::npos) return true;
  }
  return false;
}

struct CutResult {
  double detected_s = -1;   // cut -> "node node1 lost" on dtrain's stderr
  double rank_gone_s = -1;  // cut -> no process of the rank left on the cut node
  int status = -1;
  std::string err;
  json record;
};

// Starts the job, cuts node1 once it checkpointed step 4, and watches both sides.
CutResult RunAndCut(const SshTestCluster& cluster, const std::string& dir,
                    const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"launch",
                                   "-c",
                                   cluster.cluster_file(),
                                   "--job",
                                   "cut",
                                   "--log-dir",
                                   dir,
                                   "--node-timeout",
                                   kNodeTimeoutArg,
                                   "--grace-period",
                                   "2",
                                   "--max-restarts",
                                   "2",
                                   "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const char* word : {"--", "sh", "-c", kRankScript, "nodeloss-rank"}) args.push_back(word);
  DtrainProcess dtrain(args, dir);
  const std::string job_dir = dir + "/cut";
  CutResult r;
  const auto up_until = Clock::now() + std::chrono::seconds(30);
  while (CheckpointStep(job_dir) < 4 && Clock::now() < up_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(CheckpointStep(job_dir), 4) << dtrain.err();
  EXPECT_TRUE(RankRunsOn(cluster, 1));
  cluster.OnNode(1, "ip link set eth0 down");
  const auto cut = Clock::now();
  while (Clock::now() - cut < std::chrono::seconds(30) && (r.detected_s < 0 || r.rank_gone_s < 0)) {
    const double t = std::chrono::duration<double>(Clock::now() - cut).count();
    if (r.detected_s < 0 && dtrain.err().find("node node1 lost") != std::string::npos)
      r.detected_s = t;
    if (r.rank_gone_s < 0 && !RankRunsOn(cluster, 1)) r.rank_gone_s = t;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.status = dtrain.Wait(60);
  r.err = dtrain.err();
  cluster.OnNode(1, "ip link set eth0 up");
  r.record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  std::printf("cut node1: lost after %.2f s, its rank gone after %.2f s\n%s", r.detected_s,
              r.rank_gone_s, r.err.c_str());
  return r;
}

void ExpectLostAndRecovered(const CutResult& r, const std::vector<std::string>& second_nodes,
                            int world_size) {
  EXPECT_GE(r.detected_s, kNodeTimeout - 0.5) << r.err;
  EXPECT_LE(r.detected_s, kNodeTimeout + 1) << r.err;
  EXPECT_GE(r.rank_gone_s, 0) << "node1's rank still ran 30 s after the cut";
  EXPECT_LE(r.rank_gone_s, kNodeTimeout + 1 + kGrace + 0.5) << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("node node1 lost: no answer for 3 s, last seen "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("node node1 quarantined"), std::string::npos) << r.err;
  ASSERT_TRUE(r.record.is_object());
  const json& attempts = r.record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << r.record.dump(2);
  EXPECT_EQ(attempts[0]["cause"], "node-lost");
  EXPECT_EQ(attempts[0]["blamed_node"], "node1");
  EXPECT_EQ(attempts[1]["nodes"], json(second_nodes));
  EXPECT_TRUE(attempts[0].contains("recovery_s")) << attempts.dump(2);
  // Rank 0 checkpoints before it writes each step's metrics line: nothing is done twice.
  EXPECT_EQ(attempts[0]["steps_lost"], 0) << attempts.dump(2);
  EXPECT_EQ(r.record["world_size"], world_size);
  for (const json& node : r.record["nodes"]) {
    EXPECT_EQ(node.contains("quarantined"), node["host"] == "node1") << node.dump();
  }
}

// The second attempt resumed: its rank 0 started past step 0.
void ExpectResumed(const std::string& job_dir, int world_size) {
  const std::string log = ReadText(job_dir + "/rank-0.log");
  const size_t restart = log.find("--- dtrain: restart 1");
  ASSERT_NE(restart, std::string::npos) << log;
  const std::string again = log.substr(restart);
  const std::string prefix =
      "rank 0 of " + std::to_string(world_size) + " on node0 starts at step ";
  const size_t at = again.find(prefix);
  ASSERT_NE(at, std::string::npos) << again;
  EXPECT_GE(std::atoi(again.c_str() + at + prefix.size()), 4) << again;
  EXPECT_NE(again.find("rank 0 done"), std::string::npos) << again;
}

TEST(NodeLoss, CutNodeIsReplacedByTheSpareAndEndsItsOwnRank) {
  SshTestCluster cluster("node-loss-spare", 4, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-loss-spare");
  const CutResult r = RunAndCut(cluster, dir, {"--spares", "1"});
  ExpectLostAndRecovered(r, {"node0", "node2", "node3"}, 3);
  ExpectResumed(dir + "/cut", 3);
  EXPECT_NE(r.err.find("spare node(s), used once a node is quarantined: node3"), std::string::npos);
  const testing::DtrainRun status =
      testing::RunDtrain({"status", "--log-dir", dir, "--job", "cut"}, dir);
  EXPECT_NE(status.out.find("attempt 1 on node0,node1,node2: node-lost (node node1 blamed)"),
            std::string::npos)
      << status.out << status.err;
  EXPECT_NE(status.out.find("node node1 quarantined: node node1 lost"), std::string::npos)
      << status.out;
}

TEST(NodeLoss, NnodesMinMaxGoesOnWithFewerNodes) {
  SshTestCluster cluster("node-loss-shrink", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-loss-shrink");
  const CutResult r = RunAndCut(cluster, dir, {"--nnodes", "2:3"});
  ExpectLostAndRecovered(r, {"node0", "node2"}, 2);
  ExpectResumed(dir + "/cut", 2);
}

TEST(NodeLoss, BelowMinimumTheJobFailsWithTheReason) {
  SshTestCluster cluster("node-loss-min", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-loss-min");
  const CutResult r = RunAndCut(cluster, dir, {});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("cannot restart: 2 healthy node(s) left, the job needs at least 3"),
            std::string::npos)
      << r.err;
  EXPECT_LE(r.detected_s, kNodeTimeout + 1) << r.err;
}

// Nodes without shared storage (each rank's log folder on /srv/node, private to its node): rank 0
// appends a metrics line with a step and a time per step, checkpoints every 3 steps and is
// SIGKILLed after step 7 of the first attempt. Nothing is seen live; once rank 0's metrics are
// fetched at the end, each attempt's steps are placed by their time: the second attempt
// resumed from step 6, so 1 step was lost.
TEST(NodeLoss, StepsOfNodesWithoutSharedStorageArePlacedAfterTheJob) {
  SshTestCluster cluster("node-loss-private", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = "/srv/node/node-loss-private";  // private on every node
  std::filesystem::remove_all(logs);
  std::filesystem::create_directories(logs);
  const char* script = testing::kKilledAfterStepSeven;
  DtrainProcess dtrain(
      {"launch", "-c", cluster.cluster_file(), "--job", "private", "--log-dir", logs,
       "--max-restarts", "1", "--grace-period", "1", "--quiet", "--", "sh", "-c", script},
      logs);
  EXPECT_EQ(dtrain.Wait(60), 0) << dtrain.err();
  const json record = json::parse(ReadText(logs + "/private/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << dtrain.err();
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << record.dump(2);
  EXPECT_EQ(attempts[0]["first_step"], 1) << attempts.dump(2);
  EXPECT_EQ(attempts[0]["last_step"], 7);
  EXPECT_EQ(attempts[1]["first_step"], 7);
  EXPECT_EQ(attempts[1]["last_step"], 10);
  EXPECT_EQ(attempts[0]["steps_lost"], 1);
  ASSERT_TRUE(attempts[0].contains("recovery_s")) << attempts.dump(2);
  EXPECT_GT(attempts[0]["recovery_s"].get<double>(), 0.9);  // the backoff is 1 s
  EXPECT_NE(dtrain.err().find("s after the fault, 1 step(s) lost"), std::string::npos)
      << dtrain.err();
}

// A GPU falls off the bus in the first attempt: node1's rank fails at step 4 and its kernel log
// now shows Xid 79 (the stand-in dmesg first on node1's PATH). Every node answers nvidia-smi
// like a healthy HGX H100 node.
const char* kGpuFaultScript = R"sh(
ck=$DTRAIN_LOG_DIR/checkpoint
s=0; [ -f "$ck" ] && s=$(cat "$ck")
while [ "$s" -lt 12 ]; do
  sleep 0.25; s=$((s + 1))
  [ "$RANK" = 0 ] && echo "$s" >"$ck.tmp" && mv "$ck.tmp" "$ck"
  if [ "$DTRAIN_NODE" = node1 ] && [ "$s" = 4 ]; then
    echo "[ 5012.345678] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." >>"$(dirname "$(command -v nvidia-smi)")/dmesg.txt"
    echo "RuntimeError: CUDA error: unspecified launch failure" >&2
    exit 1
  fi
done
echo "rank $RANK done")sh";

struct GpuFaultRun {
  int status = -1;
  std::string err;
  json record;
};

// Three nodes and a spare, node1's GPU lost in the first attempt; `extra` dtrain options.
GpuFaultRun RunWithGpuFault(const std::string& name, const std::vector<std::string>& extra) {
  GpuFaultRun r;
  SshTestCluster cluster(name, 4, 1);
  if (!cluster.error().empty()) {
    r.err = cluster.error();
    return r;
  }
  for (int i = 0; i < 4; ++i) {
    test::WriteStandIns(cluster.dir() + "/node" + std::to_string(i) + "-bin", test::HgxQuery(),
                        "[    1.0] Linux version 6.1\n");
  }
  const std::string file = test::StandInClusterFile(cluster, 4, "");
  const std::string dir = testing::ScratchDirs::Make(name);
  std::vector<std::string> args = {"launch",    "-c",     file,       "--job", "fault",
                                   "--log-dir", dir,      "--spares", "1",     "--max-restarts",
                                   "2",         "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const char* word : {"--", "sh", "-c", kGpuFaultScript, "gpu-fault-rank"})
    args.push_back(word);
  DtrainProcess dtrain(args, dir);
  r.status = dtrain.Wait(90);
  r.err = dtrain.err();
  r.record = json::parse(ReadText(dir + "/fault/job.json"), nullptr, false);
  std::printf("%s", r.err.c_str());
  return r;
}

// One failure alone does not quarantine a node (kFailuresToQuarantine); the health check before
// the restart finds the Xid and quarantines node1 at once: the spare takes its place.
TEST(NodeLoss, NodeFailingTheHealthCheckBeforeRestartIsQuarantined) {
  const GpuFaultRun r = RunWithGpuFault("node-loss-health", {});
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined for the rest of job fault: failed the "
                       "health check before restart: node node1: Xid 79 on GPU 3"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("dtrain: health check before restart: 3 node(s) in "), std::string::npos);
  EXPECT_NE(r.err.find("s, unfit: node1\n"), std::string::npos) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  const json& attempts = r.record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << r.record.dump(2);
  EXPECT_EQ(attempts[0]["blamed_node"], "node1");
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2", "node3"}));
  EXPECT_NE(r.record["nodes"][1].value("quarantined", "").find("health check"), std::string::npos)
      << r.record["nodes"].dump(2);
  bool event = false;
  for (const json& e : r.record["events"]) event = event || e["kind"] == "health_check";
  EXPECT_TRUE(event) << r.record["events"].dump(2);
}

// The same fault without the check: node1, blamed once, runs the next attempt again.
TEST(NodeLoss, WithoutTheHealthCheckTheFaultyNodeRunsAgain) {
  const GpuFaultRun r = RunWithGpuFault(
      "node-loss-nocheck", {"--restart-health-check", "off", "--start-health-check", "off"});
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("health check"), std::string::npos) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 2u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][1]["nodes"], json({"node0", "node1", "node2"}));
}

// Nodes whose GPUs look like an HGX H100's, node1 with an Xid 79 in its kernel log before the
// job starts; `spares` of the `nodes` wait as spares; `extra` dtrain options. Each rank says
// where it runs.
GpuFaultRun RunWithFaultyNodeAtStart(const std::string& name, int nodes, int spares,
                                     const std::vector<std::string>& extra) {
  GpuFaultRun r;
  SshTestCluster cluster(name, nodes, 1);
  if (!cluster.error().empty()) {
    r.err = cluster.error();
    return r;
  }
  for (int i = 0; i < nodes; ++i) {
    test::WriteStandIns(cluster.dir() + "/node" + std::to_string(i) + "-bin", test::HgxQuery(),
                        i == 1 ? "[    1.0] Linux version 6.1\n[ 5012.345678] NVRM: Xid "
                                 "(PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has "
                                 "fallen off the bus.\n"
                               : "[    1.0] Linux version 6.1\n");
  }
  const std::string file = test::StandInClusterFile(cluster, nodes, "");
  const std::string dir = testing::ScratchDirs::Make(name);
  std::vector<std::string> args = {
      "launch", "-c", file, "--job", "start", "--log-dir", dir, "--spares", std::to_string(spares),
      "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const char* word : {"--", "sh", "-c", "echo \"rank $RANK on $DTRAIN_NODE\""})
    args.push_back(word);
  DtrainProcess dtrain(args, dir);
  r.status = dtrain.Wait(60);
  r.err = dtrain.err();
  r.record = json::parse(ReadText(dir + "/start/job.json"), nullptr, false);
  std::printf("%s", r.err.c_str());
  return r;
}

// "Find bad nodes before a launch": node1's GPU fell off the bus before the job; the check before
// the start quarantines it, the spare is checked in turn and takes its place, and the one attempt
// runs on node0, node2, node3.
TEST(NodeLoss, NodeFailingTheHealthCheckBeforeStartIsReplacedByTheSpare) {
  const GpuFaultRun r = RunWithFaultyNodeAtStart("node-start-health", 4, 1, {});
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined for the rest of job start: failed the "
                       "health check before start: node node1: Xid 79 on GPU 3"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("dtrain: health check before start: 3 node(s) in "), std::string::npos);
  EXPECT_NE(r.err.find("s, unfit: node1\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dtrain: health check before start: 1 node(s) in "), std::string::npos)
      << "the spare is checked before it runs: " << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 1u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["nodes"], json({"node0", "node2", "node3"}));
  EXPECT_NE(r.record["nodes"][1].value("quarantined", "").find("before start"), std::string::npos)
      << r.record["nodes"].dump(2);
}

// No spare and no --nnodes MIN: nothing starts, and the message says what to do.
TEST(NodeLoss, UnfitNodeWithoutASpareStopsTheStart) {
  const GpuFaultRun r = RunWithFaultyNodeAtStart("node-start-nospare", 2, 0, {});
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_NE(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("job start cannot start: 1 healthy node(s) left, the job needs at least 2 "
                       "after the health check; no rank was started"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--start-health-check off"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("rank 0 on"), std::string::npos) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  EXPECT_EQ(r.record["status"], "failed");
  EXPECT_TRUE(r.record["attempts"].empty()) << r.record.dump(2);
}

// With --nnodes MIN:MAX the job starts on the healthy nodes; with the check off, on all of them.
TEST(NodeLoss, StartHealthCheckWithFewerNodesOrOff) {
  const GpuFaultRun fewer = RunWithFaultyNodeAtStart("node-start-fewer", 3, 0, {"--nnodes", "2:3"});
  if (fewer.err.find("needs root") != std::string::npos) GTEST_SKIP() << fewer.err;
  EXPECT_EQ(fewer.status, 0) << fewer.err;
  ASSERT_TRUE(fewer.record.is_object()) << fewer.err;
  EXPECT_EQ(fewer.record["attempts"][0]["nodes"], json({"node0", "node2"}));
  const GpuFaultRun off =
      RunWithFaultyNodeAtStart("node-start-off", 2, 0, {"--start-health-check", "off"});
  EXPECT_EQ(off.status, 0) << off.err;
  EXPECT_EQ(off.err.find("health check"), std::string::npos) << off.err;
  ASSERT_TRUE(off.record.is_object()) << off.err;
  EXPECT_EQ(off.record["attempts"][0]["nodes"], json({"node0", "node1"}));
}

struct WatchRun {
  double detected_s = -1;  // the Xid written -> "failed the health watch" on dtrain's stderr
  int status = -1;
  std::string err;
  json record;
};

// How node1's GPU breaks while its rank goes on running: an Xid 79 in its kernel log (the GPU fell
// off the bus), or its nvidia-smi starting to report that GPU 3 needs a reset (the driver's
// recovery action after an uncorrectable error).
enum class GpuFault { kXid79, kRecoveryReset };

// Three nodes and a spare that look like HGX H100 nodes, running kRankScript; once rank 0
// checkpointed step 4, node1's GPU breaks (`fault`) while its rank goes on running, as a rank on
// a dead GPU may hang instead of failing.
WatchRun RunAndBreakAGpu(const std::string& name, const std::string& watch_s,
                         GpuFault fault = GpuFault::kXid79) {
  WatchRun r;
  SshTestCluster cluster(name, 4, 1);
  if (!cluster.error().empty()) {
    r.err = cluster.error();
    return r;
  }
  for (int i = 0; i < 4; ++i) {
    test::WriteStandIns(cluster.dir() + "/node" + std::to_string(i) + "-bin", test::HgxQuery(),
                        "[    1.0] Linux version 6.1\n");
  }
  const std::string file = test::StandInClusterFile(cluster, 4, "");
  const std::string dir = testing::ScratchDirs::Make(name);
  std::vector<std::string> args = {"launch", "-c",
                                   file,     "--job",
                                   "watch",  "--log-dir",
                                   dir,      "--spares",
                                   "1",      "--max-restarts",
                                   "1",      "--grace-period",
                                   "2",      "--health-watch",
                                   watch_s,  "--quiet"};
  for (const char* word : {"--", "sh", "-c", kRankScript, "nodeloss-rank"}) args.push_back(word);
  DtrainProcess dtrain(args, dir);
  const std::string job_dir = dir + "/watch";
  const auto up_until = Clock::now() + std::chrono::seconds(30);
  while (CheckpointStep(job_dir) < 4 && Clock::now() < up_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(CheckpointStep(job_dir), 4) << dtrain.err();
  if (fault == GpuFault::kXid79) {
    std::ofstream(cluster.dir() + "/node1-bin/dmesg.txt", std::ios::app)
        << "[ 5012.345678] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU "
           "has fallen off the bus.\n";
  } else {
    // Written whole, then renamed: the stand-in never prints half a report.
    std::ofstream(cluster.dir() + "/node1-bin/q.new")
        << test::WithField(test::HgxQuery(), 3, "", "GPU Recovery Action", "Reset");
    std::filesystem::rename(cluster.dir() + "/node1-bin/q.new", cluster.dir() + "/node1-bin/q.txt");
  }
  const auto broken = Clock::now();
  while (Clock::now() - broken < std::chrono::seconds(15) && r.detected_s < 0 && dtrain.running()) {
    if (dtrain.err().find("failed the health watch") != std::string::npos)
      r.detected_s = std::chrono::duration<double>(Clock::now() - broken).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.status = dtrain.Wait(60);
  r.err = dtrain.err();
  r.record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  std::printf("GPU broken on node1: found after %.2f s\n%s", r.detected_s, r.err.c_str());
  return r;
}

// The health watch (every second here) finds node1's Xid within its interval, stops the attempt
// as for a failing rank, quarantines node1, and the spare takes its place.
TEST(NodeLoss, NodeTurningUnfitDuringTheRunIsFoundByTheHealthWatch) {
  const WatchRun r = RunAndBreakAGpu("node-watch", "1");
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_GE(r.detected_s, 0) << r.err;
  EXPECT_LE(r.detected_s, 3) << "the interval (1 s) and one round of probes: " << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 failed the health watch "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Xid 79 on GPU 3"), std::string::npos) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  const json& attempts = r.record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << r.record.dump(2);
  EXPECT_EQ(attempts[0]["cause"], "unhealthy");
  EXPECT_EQ(attempts[0]["blamed_node"], "node1");
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2", "node3"}));
  EXPECT_NE(r.record["nodes"][1].value("quarantined", "").find("health watch"), std::string::npos)
      << r.record["nodes"].dump(2);
}

// The same with the driver asking for a reset of GPU 3 instead: the watch reads it from
// nvidia-smi -q and the spare takes node1's place.
TEST(NodeLoss, GpuTheDriverWantsResetDuringTheRunIsFoundByTheHealthWatch) {
  const WatchRun r = RunAndBreakAGpu("node-watch-reset", "1", GpuFault::kRecoveryReset);
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_GE(r.detected_s, 0) << r.err;
  EXPECT_LE(r.detected_s, 3) << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("the driver asks for a recovery action on GPU 3 (Reset)"), std::string::npos)
      << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 2u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["blamed_node"], "node1");
  EXPECT_EQ(r.record["attempts"][1]["nodes"], json({"node0", "node2", "node3"}));
}

// Its twin without the watch: nothing notices, and node1's rank runs to the end on it.
TEST(NodeLoss, WithoutTheHealthWatchTheBrokenGpuGoesUnnoticed) {
  const WatchRun r = RunAndBreakAGpu("node-nowatch", "0");
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_LT(r.detected_s, 0) << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 1u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["nodes"], json({"node0", "node1", "node2"}));
}

// A node whose sshd is gone before the launch (connection refused) is set aside when a spare
// can take its place; without one the launch stops before any rank starts, as it always did.
TEST(NodeLoss, NodeUnreachableAtTheStartIsReplacedByTheSpare) {
  SshTestCluster cluster("node-start-unreached", 4, 1);
  if (!cluster.error().empty()) GTEST_SKIP() << cluster.error();
  test::RunOutput("kill -KILL $(cat " + cluster.dir() + "/node1/sshd.pid)");
  const std::string dir = testing::ScratchDirs::Make("node-start-unreached");
  auto launch = [&](const std::string& job, const std::string& spares) {
    DtrainProcess dtrain(
        {"launch", "-c", cluster.cluster_file(), "--job", job, "--log-dir", dir, "--spares", spares,
         "--quiet", "--", "sh", "-c", "echo \"rank $RANK on $DTRAIN_NODE\""},
        dir);
    const int status = dtrain.Wait(60);
    std::printf("%s", dtrain.err().c_str());
    return std::make_pair(status, dtrain.err());
  };
  const auto [status, err] = launch("spare", "1");
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: node node1 quarantined for the rest of job spare: could not be "
                     "reached at the start: node node1 ("),
            std::string::npos)
      << err;
  const json record = json::parse(ReadText(dir + "/spare/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << err;
  ASSERT_EQ(record["attempts"].size(), 1u) << record.dump(2);
  EXPECT_EQ(record["attempts"][0]["nodes"], json({"node0", "node2", "node3"}));
  EXPECT_NE(record["nodes"][1].value("quarantined", "").find("could not be reached"),
            std::string::npos)
      << record["nodes"].dump(2);
  EXPECT_EQ(ReadText(dir + "/spare/rank-2.log"), "rank 2 on node3\n");

  const auto [no_spare_status, no_spare_err] = launch("nospare", "0");
  EXPECT_NE(no_spare_status, 0) << no_spare_err;
  EXPECT_NE(no_spare_err.find("1 of 4 node(s) of " + cluster.cluster_file() +
                              " failed the check before launch; no rank was started"),
            std::string::npos)
      << no_spare_err;
}

}  // namespace
}  // namespace dtrain
