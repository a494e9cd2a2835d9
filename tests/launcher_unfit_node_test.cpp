// Nodes that are reachable but unfit, found by the doctor's fast health checks on real sshd
// nodes in network namespaces, with nvidia-smi and dmesg stand-ins of an HGX H100 node first on
// each node's PATH: before a restart (a GPU lost in the first attempt), before the start, and
// during the run (the health watch), each with a spare to take the unfit node's place.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/checkpointed_rank.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/interrupted_start.h"
#include "tests/support/launch_run.h"
#include "tests/support/nvidia_smi_fixture.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using nlohmann::json;
using test::HgxNodes;
using test::kCheckpointedRankScript;
using test::LaunchRun;
using test::ReadText;
using test::RunToTheEnd;
using test::SecondsUntilSaid;
using test::SshTestCluster;
using test::WaitForStep;
using testing::DtrainProcess;
using Clock = std::chrono::steady_clock;

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

// Three nodes and `spares` spares (node3, node4), node1's GPU lost in the first attempt;
// `extra` dtrain options. With `bad_spare`, node3's GPU fell off the bus before the job.
LaunchRun RunWithGpuFault(const std::string& name, const std::vector<std::string>& extra,
                          int spares = 1, bool bad_spare = false) {
  LaunchRun r;
  SshTestCluster cluster(name, 3 + spares, 1);
  if (!cluster.error().empty()) {
    r.err = cluster.error();
    return r;
  }
  const std::string file = HgxNodes(cluster, 3 + spares, bad_spare ? 3 : -1);
  const std::string dir = testing::ScratchDirs::Make(name);
  std::vector<std::string> args = {"launch",
                                   "-c",
                                   file,
                                   "--job",
                                   "fault",
                                   "--log-dir",
                                   dir,
                                   "--spares",
                                   std::to_string(spares),
                                   "--max-restarts",
                                   "2",
                                   "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const char* word : {"--", "sh", "-c", kGpuFaultScript, "gpu-fault-rank"})
    args.push_back(word);
  return RunToTheEnd(args, dir, "fault", 90);
}

// One failure alone does not quarantine a node (kFailuresToQuarantine); the health check before
// the restart finds the Xid and quarantines node1 at once: the spare takes its place.
TEST(UnfitNode, NodeFailingTheHealthCheckBeforeRestartIsQuarantined) {
  const LaunchRun r = RunWithGpuFault("node-loss-health", {});
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined in job fault: failed the "
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

// The spare that would take node1's place is itself unfit (an Xid 79 from before the job, which
// the check before the start did not see: spares are checked when picked). The check before the
// restart checks it as it is picked, quarantines it, and the next spare runs instead.
TEST(UnfitNode, AnUnfitSpareIsFoundBeforeTheRestartAndTheNextSpareRuns) {
  const LaunchRun r = RunWithGpuFault("node-bad-spare", {}, 2, /*bad_spare=*/true);
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: health check before restart: 3 node(s) in "), std::string::npos);
  EXPECT_NE(r.err.find("dtrain: node node3 quarantined in job fault: failed the health check "
                       "before restart: node node3: Xid 79 on GPU 3"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("s, unfit: node3\ndtrain: health check before restart: 3 node(s) in "),
            std::string::npos)
      << "the pick with node4 is checked again, node4's connections to the others with it: "
      << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  const json& attempts = r.record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << r.record.dump(2);
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2", "node4"}));
}

// The same fault without the check: node1, blamed once, runs the next attempt again.
TEST(UnfitNode, WithoutTheHealthCheckTheFaultyNodeRunsAgain) {
  const LaunchRun r = RunWithGpuFault(
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
LaunchRun RunWithFaultyNodeAtStart(const std::string& name, int nodes, int spares,
                                   const std::vector<std::string>& extra) {
  LaunchRun r;
  SshTestCluster cluster(name, nodes, 1);
  if (!cluster.error().empty()) {
    r.err = cluster.error();
    return r;
  }
  const std::string file = HgxNodes(cluster, nodes, 1);
  const std::string dir = testing::ScratchDirs::Make(name);
  std::vector<std::string> args = {
      "launch", "-c", file, "--job", "start", "--log-dir", dir, "--spares", std::to_string(spares),
      "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const char* word : {"--", "sh", "-c", "echo \"rank $RANK on $DTRAIN_NODE\""})
    args.push_back(word);
  return RunToTheEnd(args, dir, "start", 60);
}

// "Find bad nodes before a launch": node1's GPU fell off the bus before the job; the check before
// the start quarantines it, the pick is checked again with the spare, which takes its place, and
// the one attempt runs on node0, node2, node3.
TEST(UnfitNode, NodeFailingTheHealthCheckBeforeStartIsReplacedByTheSpare) {
  const LaunchRun r = RunWithFaultyNodeAtStart("node-start-health", 4, 1, {});
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined in job start: failed the "
                       "health check before start: node node1: Xid 79 on GPU 3"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("dtrain: health check before start: 3 node(s) in "), std::string::npos);
  EXPECT_NE(r.err.find("s, unfit: node1\ndtrain: health check before start: 3 node(s) in "),
            std::string::npos)
      << "the spare is checked before it runs, with the nodes it joins: " << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 1u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["nodes"], json({"node0", "node2", "node3"}));
  EXPECT_NE(r.record["nodes"][1].value("quarantined", "").find("before start"), std::string::npos)
      << r.record["nodes"].dump(2);
}

// No spare and no --nnodes MIN: nothing starts, and the message says what to do.
TEST(UnfitNode, UnfitNodeWithoutASpareStopsTheStart) {
  const LaunchRun r = RunWithFaultyNodeAtStart("node-start-nospare", 2, 0, {});
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
TEST(UnfitNode, StartHealthCheckWithFewerNodesOrOff) {
  const LaunchRun fewer = RunWithFaultyNodeAtStart("node-start-fewer", 3, 0, {"--nnodes", "2:3"});
  if (fewer.err.find("needs root") != std::string::npos) GTEST_SKIP() << fewer.err;
  EXPECT_EQ(fewer.status, 0) << fewer.err;
  ASSERT_TRUE(fewer.record.is_object()) << fewer.err;
  EXPECT_EQ(fewer.record["attempts"][0]["nodes"], json({"node0", "node2"}));
  const LaunchRun off =
      RunWithFaultyNodeAtStart("node-start-off", 2, 0, {"--start-health-check", "off"});
  EXPECT_EQ(off.status, 0) << off.err;
  EXPECT_EQ(off.err.find("health check"), std::string::npos) << off.err;
  ASSERT_TRUE(off.record.is_object()) << off.err;
  EXPECT_EQ(off.record["attempts"][0]["nodes"], json({"node0", "node1"}));
}

// How node1 breaks while its rank goes on running: an Xid 79 in its kernel log (the GPU fell off
// the bus), its nvidia-smi starting to report that GPU 3 needs a reset (the driver's recovery
// action after an uncorrectable error), its scratch file system (the node's private tmpfs at
// /srv/node) unmounted, which a health check of the cluster file's looks for, or an uncorrected
// memory error in its kernel log (EDAC's line for a failed memory module).
enum class NodeFault { kXid79, kRecoveryReset, kScratchLost, kMemoryUncorrected };

// The cluster file's own check of each node's scratch.
const char* kScratchCheck = R"yaml(health_checks:
  - name: scratch
    run: mountpoint -q /srv/node || { echo "/srv/node is not mounted on $(hostname)"; exit 1; }
)yaml";

// Three nodes and a spare that look like HGX H100 nodes, running kCheckpointedRankScript; once rank
// 0 checkpointed step 4, node1's GPU breaks (`fault`) while its rank goes on running, as a rank on
// a dead GPU may hang instead of failing.
LaunchRun RunAndBreakAGpu(const std::string& name, const std::string& watch_s,
                          NodeFault fault = NodeFault::kXid79) {
  LaunchRun r;
  SshTestCluster cluster(name, 4, 1);
  if (!cluster.error().empty()) {
    r.err = cluster.error();
    return r;
  }
  const std::string file = HgxNodes(cluster, 4);
  if (fault == NodeFault::kScratchLost) std::ofstream(file, std::ios::app) << kScratchCheck;
  const std::string dir = testing::ScratchDirs::Make(name);
  std::vector<std::string> args = {"launch", "-c",
                                   file,     "--job",
                                   "watch",  "--log-dir",
                                   dir,      "--spares",
                                   "1",      "--max-restarts",
                                   "1",      "--grace-period",
                                   "2",      "--health-watch",
                                   watch_s,  "--quiet"};
  for (const char* word : {"--", "sh", "-c", kCheckpointedRankScript, "nodeloss-rank"})
    args.push_back(word);
  DtrainProcess dtrain(args, dir);
  const std::string job_dir = dir + "/watch";
  EXPECT_TRUE(WaitForStep(job_dir, 4)) << dtrain.err();
  if (fault == NodeFault::kXid79) {
    std::ofstream(cluster.dir() + "/node1-bin/dmesg.txt", std::ios::app)
        << "[ 5012.345678] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU "
           "has fallen off the bus.\n";
  } else if (fault == NodeFault::kMemoryUncorrected) {
    std::ofstream(cluster.dir() + "/node1-bin/dmesg.txt", std::ios::app)
        << "[ 6021.114233] EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#2_DIMM#0 "
           "(channel:2 slot:0 page:0x5a3f12 offset:0x0 grain:32 - err_code:0x0000:0x009f "
           "socket:1 imc:0 rank:0 bg:0 ba:3 row:0x2d1f col:0x0)\n";
  } else if (fault == NodeFault::kScratchLost) {
    EXPECT_EQ(cluster.OnNode(1, "umount -l /srv/node"), "");
  } else {
    // Written whole, then renamed: the stand-in never prints half a report.
    std::ofstream(cluster.dir() + "/node1-bin/q.new")
        << test::WithField(test::HgxQuery(), 3, "", "GPU Recovery Action", "Reset");
    std::filesystem::rename(cluster.dir() + "/node1-bin/q.new", cluster.dir() + "/node1-bin/q.txt");
  }
  r.detected_s = SecondsUntilSaid(dtrain, "failed the health watch", 15);
  r.status = dtrain.Wait(60);
  r.err = dtrain.err();
  r.record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  std::printf("node1 broken: found after %.2f s\n%s", r.detected_s, r.err.c_str());
  return r;
}

// What a run of RunAndBreakAGpu with the watch every second shows: node1 found within the
// interval and two rounds of probes (the round that began before the fault, and the next), the
// finding (`said`) on the console, and the second attempt on the spare in node1's place. A round
// takes 0.2-0.7 s on the idle 2-core machine and up to 3 s beside busy tests (measured for
// HorovodElastic.NodeFoundUnfitByTheHealthWatchLeavesAndTheOthersGoOn), so 7 s; the ranks have
// 9 s of steps left after the fault.
void ExpectNode1FoundAndReplaced(const LaunchRun& r, const std::string& said) {
  EXPECT_GE(r.detected_s, 0) << r.err;
  EXPECT_LE(r.detected_s, 7) << "the interval (1 s) and two rounds of probes: " << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 failed the health watch "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(said), std::string::npos) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 2u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["blamed_node"], "node1");
  EXPECT_EQ(r.record["attempts"][1]["nodes"], json({"node0", "node2", "node3"}));
}

// The health watch (every second here) finds node1's Xid within its interval, stops the attempt
// as for a failing rank, quarantines node1, and the spare takes its place.
TEST(UnfitNode, NodeTurningUnfitDuringTheRunIsFoundByTheHealthWatch) {
  const LaunchRun r = RunAndBreakAGpu("node-watch", "1");
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  ExpectNode1FoundAndReplaced(r, "Xid 79 on GPU 3");
  ASSERT_TRUE(r.record.is_object()) << r.err;
  EXPECT_EQ(r.record["attempts"][0]["cause"], "unhealthy");
  EXPECT_NE(r.record["nodes"][1].value("quarantined", "").find("health watch"), std::string::npos)
      << r.record["nodes"].dump(2);
}

// The same with the driver asking for a reset of GPU 3 instead: the watch reads it from
// nvidia-smi -q and the spare takes node1's place.
TEST(UnfitNode, GpuTheDriverWantsResetDuringTheRunIsFoundByTheHealthWatch) {
  const LaunchRun r = RunAndBreakAGpu("node-watch-reset", "1", NodeFault::kRecoveryReset);
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  ExpectNode1FoundAndReplaced(r, "the driver asks for a recovery action on GPU 3 (Reset)");
}

// The same with a memory module of node1's failing: the watch reads EDAC's line in its kernel
// log, and the spare takes node1's place.
TEST(UnfitNode, UncorrectedMemoryErrorDuringTheRunIsFoundByTheHealthWatch) {
  const LaunchRun r = RunAndBreakAGpu("node-watch-memory", "1", NodeFault::kMemoryUncorrected);
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  ExpectNode1FoundAndReplaced(r,
                              "node node1: 1 uncorrected memory error(s) (EDAC MC1, "
                              "CPU_SrcID#1_MC#0_Chan#2_DIMM#0) this boot");
}

// Its twin without the watch: nothing notices, and node1's rank runs to the end on it.
TEST(UnfitNode, WithoutTheHealthWatchTheBrokenGpuGoesUnnoticed) {
  const LaunchRun r = RunAndBreakAGpu("node-nowatch", "0");
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_LT(r.detected_s, 0) << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 1u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["nodes"], json({"node0", "node1", "node2"}));
}

// A node failing the cluster file's own health check during the run: node1's scratch is
// unmounted; the watch runs the check with its own, stops the attempt, quarantines node1 with
// what the check printed, and the spare takes its place.
TEST(UnfitNode, NodeFailingASiteHealthCheckDuringTheRunIsReplacedByTheSpare) {
  const LaunchRun r = RunAndBreakAGpu("node-watch-site", "1", NodeFault::kScratchLost);
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  ExpectNode1FoundAndReplaced(
      r, "node node1: health check 'scratch' failed (exit 1): /srv/node is not mounted on node1");
  ASSERT_TRUE(r.record.is_object()) << r.err;
  EXPECT_NE(r.record["nodes"][1].value("quarantined", "").find("health check 'scratch'"),
            std::string::npos)
      << r.record["nodes"].dump(2);
}

// node1's nvidia-smi never answers (`nvidia-smi -q` reads a FIFO nothing writes: a GPU hung in
// the driver), so a health check of it runs to its 20 s timeout. Ctrl-C meanwhile stops dtrain at
// once, before the start and before a restart: what the check ran on node1 is killed, no rank
// runs anywhere, and job.json says interrupted.
void HangNvidiaSmi(const SshTestCluster& cluster, int node) {
  const std::string query = cluster.dir() + "/node" + std::to_string(node) + "-bin/q.txt";
  std::filesystem::remove(query);
  ASSERT_EQ(::mkfifo(query.c_str(), 0644), 0) << query;
}

// Sends SIGINT once node1 runs the hung query; dtrain must exit 130 within 2.5 s.
void InterruptDuringTheCheck(const SshTestCluster& cluster, DtrainProcess& dtrain) {
  const std::string query = "cat " + cluster.dir() + "/node1-bin/q.txt";
  ASSERT_TRUE(testing::WaitFor([&] { return !cluster.NodeProcessesWith(1, query).empty(); }, 30))
      << dtrain.err();
  const auto signalled = Clock::now();
  dtrain.Signal(SIGINT);
  ASSERT_GE(dtrain.Wait(10), 0) << dtrain.err();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - signalled).count(), 2.5);
  EXPECT_EQ(dtrain.exit_status().signal, 0) << dtrain.err();  // it exited, not killed
  EXPECT_EQ(dtrain.exit_status().code, 128 + SIGINT) << dtrain.err();
  EXPECT_TRUE(testing::WaitFor([&] { return cluster.ProcessesOnNodesWith(2, query).empty(); }, 3))
      << cluster.ProcessesOnNodesWith(2, query);
  EXPECT_EQ(cluster.ProcessesOnNodesWith(2, "sleep 300"), "");
}

TEST(UnfitNode, CtrlCDuringAHealthCheckThatHangsStopsAtOnce) {
  SshTestCluster cluster("node-check-int", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = HgxNodes(cluster, 2);
  const std::string dir = testing::ScratchDirs::Make("node-check-int");
  HangNvidiaSmi(cluster, 1);
  DtrainProcess start(
      {"launch", "-q", "-c", file, "--log-dir", dir, "--job", "s", "--", "sleep", "300"}, dir);
  InterruptDuringTheCheck(cluster, start);
  EXPECT_NE(start.err().find("dtrain: health check before start: cut short by SIGINT after "),
            std::string::npos)
      << start.err();
  test::ExpectInterruptedBeforeStart(start, dir + "/s", "s", "during the health check");

  // Before a restart: node1's rank hangs its nvidia-smi and fails; the check before the restart
  // waits on it (no health watch, so nothing else asks nvidia-smi meanwhile).
  std::filesystem::remove(cluster.dir() + "/node1-bin/q.txt");
  std::ofstream(cluster.dir() + "/node1-bin/q.txt") << test::HgxQuery();
  DtrainProcess restart(
      {"launch", "-q", "-c", file, "--log-dir", dir, "--job", "r", "--max-restarts", "1",
       "--health-watch", "0", "--", "sh", "-c",
       "if [ \"$DTRAIN_NODE\" = node1 ]; then q=$(dirname \"$(command -v nvidia-smi)\")/q.txt; "
       "rm -f \"$q\"; mkfifo \"$q\"; exit 1; fi; exec sleep 300"},
      dir);
  // The check before the start reads the query too (a plain file then): wait for the failure.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return restart.err().find("dtrain: rank 1 on node node1 failed") != std::string::npos;
      },
      30))
      << restart.err();
  InterruptDuringTheCheck(cluster, restart);
  EXPECT_NE(restart.err().find("dtrain: rank 1 on node node1 failed: exit 1"), std::string::npos)
      << restart.err();
  EXPECT_NE(restart.err().find("dtrain: health check before restart: cut short by SIGINT after "),
            std::string::npos)
      << restart.err();
  EXPECT_NE(restart.err().find("dtrain: job r interrupted by SIGINT before it restarted"),
            std::string::npos)
      << restart.err();
  const json record = json::parse(ReadText(dir + "/r/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "interrupted");
  EXPECT_EQ(record["attempts"].size(), 1u) << record.dump(2);
}

}  // namespace
}  // namespace dtrain
