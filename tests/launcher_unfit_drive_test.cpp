// A node's drive that fails or hangs while a job runs, on real sshd nodes in network namespaces:
// node1's job folder (node0's, of a one-node job) is a disk of its own (tests/support/loop_disk.h),
// taken away (the health watch's test write finds it, the spare takes node1's place) or held back
// (a warning; after a failed attempt the spare takes the node's place).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/checkpointed_rank.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/launch_run.h"
#include "tests/support/loop_disk.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/slow_disk.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using nlohmann::json;
using test::kCheckpointedRankScript;
using test::ReadText;
using test::SecondsUntilSaid;
using test::SshTestCluster;
using testing::DtrainProcess;

// `dtrain launch` of `script` (sh -c, then `script_args`) as job `job` in `logs`: three nodes of
// `cluster_file` and a spare, the health watch every second, one restart, a 2 s grace period.
std::vector<std::string> WatchedJob(const std::string& cluster_file, const std::string& job,
                                    const std::string& logs, const char* script,
                                    const std::vector<std::string>& script_args) {
  std::vector<std::string> args = {"launch",     "-c",
                                   cluster_file, "--job",
                                   job,          "--log-dir",
                                   logs,         "--spares",
                                   "1",          "--max-restarts",
                                   "1",          "--grace-period",
                                   "2",          "--health-watch",
                                   "1",          "--quiet",
                                   "--",         "sh",
                                   "-c",         script};
  args.insert(args.end(), script_args.begin(), script_args.end());
  return args;
}

// Waits up to 30 s until job folder `job_dir`'s rank 1 said it started on node1.
bool RankOneStartedOnNode1(const std::string& job_dir) {
  return testing::WaitFor(
      [&] {
        return ReadText(job_dir + "/rank-1.log").find("rank 1 of 3 on node1 starts") !=
               std::string::npos;
      },
      30);
}

// A node's drive goes while the job runs: node1's job folder, on the node's own storage, is an
// ext4 disk of its own (tests/support/loop_disk.h), taken away once the ranks run, as a drive that
// falls off the bus. The ranks (shell loops) write nothing there, so none fails: the health watch's
// test write (dtrain-doctor(1) disk-write) finds it within its interval and a round of probes, the
// attempt stops, node1 is quarantined, and the spare takes its place.
TEST(UnfitNode, DriveGoneDuringTheRunIsFoundByTheHealthWatch) {
  SshTestCluster cluster("node-drive", 4, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = test::FreshPrivateFolder("node-drive");
  const std::string job_dir = logs + "/watch";
  // Node1's job folder, on node1 only; 2 GB (sparse): less than 1 GiB free fails the start's check.
  testing::LoopDisk disk(testing::ScratchDirs::Make("node-drive"), "2G", cluster.InNode(1),
                         job_dir);
  ASSERT_EQ(disk.error(), "");
  DtrainProcess dtrain(
      WatchedJob(cluster.cluster_file(), "watch", logs, kCheckpointedRankScript, {"nodeloss-rank"}),
      logs);
  ASSERT_TRUE(RankOneStartedOnNode1(job_dir)) << dtrain.err();
  ASSERT_TRUE(disk.Fail()) << disk.error();
  const double detected_s = SecondsUntilSaid(dtrain, "failed the health watch", 15);
  const int status = dtrain.Wait(60);
  const std::string err = dtrain.err();
  std::printf("node1's drive gone: found after %.2f s\n%s", detected_s, err.c_str());
  EXPECT_GE(detected_s, 0) << err;
  // The interval and two rounds under load, as ExpectNode1FoundAndReplaced
  // (launcher_unfit_node_test.cpp) allows.
  EXPECT_LE(detected_s, 7) << "the interval (1 s) and two rounds of probes: " << err;
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: node node1 failed the health watch "), std::string::npos) << err;
  EXPECT_NE(err.find("node node1: cannot write in log dir " + job_dir + ": "), std::string::npos)
      << err;
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << err;
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << record.dump(2);
  EXPECT_EQ(attempts[0]["cause"], "unhealthy");
  EXPECT_EQ(attempts[0]["blamed_node"], "node1");
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2", "node3"}));
}

// Ranks as kCheckpointedRankScript's, for 160 steps, a restart's for 8; node $2's, in the first
// attempt, ends with NCCL's watchdog message (a collective timed out, which names no node) once
// the file $1 is there.
const char* kTimeoutOnSignal = R"sh(
ck=$DTRAIN_LOG_DIR/checkpoint
s=0; [ -f "$ck" ] && s=$(cat "$ck")
end=160; [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] || end=$((s + 8))
echo "rank $RANK of $WORLD_SIZE on $DTRAIN_NODE starts at step $s"
mkdir -p "$DTRAIN_LOG_DIR/metrics"
while [ "$s" -lt "$end" ]; do
  sleep 0.25; s=$((s + 1))
  if [ "$RANK" = 0 ]; then
    echo "$s" >"$ck.tmp" && mv "$ck.tmp" "$ck"
    echo "{\"step\": $s}" >>"$DTRAIN_LOG_DIR/metrics/rank-0.jsonl"
  fi
  if [ "$DTRAIN_NODE" = "$2" ] && [ -f "$1" ] && [ ! -f "$1.done" ]; then
    touch "$1.done"
    echo "torch.distributed.DistBackendError: [Rank $RANK] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out." >&2
    exit 1
  fi
done
echo "rank $RANK done")sh";

// A job of the first `nodes` - 1 nodes of a test cluster `name` and its last node as the spare,
// whose node `node` has its job folder on a drive of its own that starts to hang during the run
// (its writes held to 1 KiB/s: the health watch's 64 KiB test write there does not end within
// 1 s). That is a warning (`warned`, after "dtrain: warning: node nodeN: writing 64 KiB in log dir
// JOB had not ended after 1 s"), said once however many rounds find it; the job goes on. When the
// attempt then fails with a timeout that names no node (node `failing`'s rank prints NCCL's
// watchdog message), node `node` is the likeliest cause: the spare takes its place, and the second
// attempt runs on `next_nodes`.
void DriveHeldBackDuringAFailedAttempt(const std::string& name, int nodes, int node,
                                       const std::string& warned, int failing,
                                       const json& next_nodes) {
  SshTestCluster cluster(name, nodes, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string node_name = "node" + std::to_string(node);
  const std::string logs = test::FreshPrivateFolder(name);
  const std::string job_dir = logs + "/hang";
  const std::string scratch = testing::ScratchDirs::Make(name);
  // 2 GB (sparse): less than 1 GiB free fails the start's check.
  testing::SlowDisk drive(scratch + "/drive", "dtrain-" + name, 1024, "2G", cluster.InNode(node),
                          job_dir);
  ASSERT_EQ(drive.error(), "");
  const std::string file = scratch + "/cluster.yaml";
  testing::WriteFile(
      file, ReadText(cluster.cluster_file()) + "env: {DTRAIN_PROBE_WRITE_TIMEOUT: \"1\"}\n");
  const std::string fail = scratch + "/fail";
  DtrainProcess dtrain(WatchedJob(file, "hang", logs, kTimeoutOnSignal,
                                  {"rank", fail, "node" + std::to_string(failing)}),
                       logs);
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return ReadText(job_dir + "/rank-" + std::to_string(node) + ".log")
                   .find("on " + node_name + " starts") != std::string::npos;
      },
      30))
      << dtrain.err();
  // What runs on the node (its sshd, and the sessions dtrain keeps open to it) and what they start
  // from now on (the watch's probes) write there at 1 KiB/s. The rank's own writes there (rank 0's
  // checkpoint) are left as they were, so that it goes on until it fails as told: a rank stuck in
  // a write is the stall watch's (dtrain-launch(1)).
  ASSERT_TRUE(drive.Move(std::stoi(ReadText(cluster.dir() + "/" + node_name + "/sshd.pid"))));
  for (const std::string& process : cluster.NodeProcesses(node)) {
    if (process.find(fail) == std::string::npos)
      drive.Move(std::stoi(process.substr(0, process.find(' '))));
  }
  const std::string warning = "dtrain: warning: node " + node_name +
                              ": writing 64 KiB in log dir " + job_dir +
                              " had not ended after 1 s" + warned;
  const double warned_s = SecondsUntilSaid(dtrain, warning, 40);
  ASSERT_GE(warned_s, 0) << dtrain.err();
  // Another round finds it again before the attempt fails: each round leaves its write to the
  // node's drive stuck there, and a round starts once the one before it was judged, so with the
  // third round's write there the second's warning was taken (a round takes the write's limit and
  // the 5 s the probe's guard gives the stuck write to end: 5-10 s here).
  const std::string stuck = job_dir + "/.dtrain-probe-write.";
  ASSERT_TRUE(
      testing::WaitFor([&] { return cluster.NodeProcessesWith(node, stuck).size() >= 3; }, 60))
      << dtrain.err();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  testing::WriteFile(fail, "");
  const int status = dtrain.Wait(90);
  const std::string err = dtrain.err();
  std::printf("%s's drive held back: warned after %.2f s\n%s", node_name.c_str(), warned_s,
              err.c_str());
  EXPECT_EQ(status, 0) << err;
  size_t said = 0;
  for (size_t at = err.find(warning); at != std::string::npos; at = err.find(warning, at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << err;
  EXPECT_NE(err.find("dtrain: node " + node_name +
                     " quarantined for the rest of job hang: the health checks warned of it "
                     "during the failed attempt: node " +
                     node_name + ": writing 64 KiB in "),
            std::string::npos)
      << err;
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << err;
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << record.dump(2);
  EXPECT_EQ(attempts[0]["cause"], "collective-timeout");
  EXPECT_TRUE(attempts[0]["blamed_node"].is_null()) << attempts[0].dump();
  EXPECT_EQ(attempts[1]["nodes"], next_nodes);
}

// Node1's drive hangs while node0's and node2's writes in the same place end in time: a warning
// held against node1.
TEST(UnfitNode, NodeWhoseDriveHangsDuringAFailedAttemptIsLeftOut) {
  DriveHeldBackDuringAFailedAttempt("node-hang", 4, 1,
                                    ", while nodes node0, node2 wrote there in time", 2,
                                    json({"node0", "node2", "node3"}));
}

// A job on one node: no other node's write to compare with, but the probe says the job's folder
// is on ext4, a drive of the node's own, so the hang is still held against it.
TEST(UnfitNode, OneNodeWhoseOwnDriveHangsDuringAFailedAttemptIsLeftOut) {
  DriveHeldBackDuringAFailedAttempt("own-drive-hang", 2, 0, " (ext4, a drive of the node's own)", 0,
                                    json({"node1"}));
}

}  // namespace
}  // namespace dtrain
