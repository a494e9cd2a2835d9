// A quarantined node returns to a job running short of nodes, as torchrun's agents take a node
// back under --nnodes MIN:MAX. Real faults on sshd nodes in network namespaces: node1's link is
// cut (`ip link set eth0 down`) and, once dtrain has named it lost and gone on with two nodes,
// restored. The health watch's rounds (--health-watch 1) probe node1 again; when it has passed
// two rounds in a row, the job restarts on all three nodes from its checkpoint, and that restart
// is not counted against --max-restarts. Also a node found unfit (a GPU fallen off the bus, in
// the kernel log of an nvidia-smi and dmesg stand-in) that is fit again after its "reboot".
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/checkpointed_rank.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/gpu_node_stand_ins.h"
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

// Seconds since `start`.
double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Waits (at most `timeout_s`) for `text` on dtrain's stderr; the seconds since `start` it took,
// -1 if it never came.
double WaitForText(const DtrainProcess& dtrain, const std::string& text, Clock::time_point start,
                   double timeout_s) {
  while (Since(start) < timeout_s) {
    if (dtrain.err().find(text) != std::string::npos) return Since(start);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// The project a --sync test launches from: DIR/src holding synced.txt ("yes"), which each rank
// reads in its workdir. Returns DIR/src.
std::string SyncedProject(const std::string& dir) {
  const std::string src = dir + "/src";
  std::filesystem::create_directories(src);
  testing::WriteFile(src + "/synced.txt", "yes\n");
  return src;
}

// `cluster_text` with every node's workdir in its private storage (/srv/node/work, which only
// --sync fills), written beside the cluster's file; returns its path.
std::string PrivateWorkdirs(const SshTestCluster& cluster, const std::string& cluster_text) {
  const std::string file = cluster.dir() + "/workdir.yaml";
  testing::WriteFile(file, cluster_text + "workdir: /srv/node/work\n");
  return file;
}

// The checkpointed rank (tests/support/checkpointed_rank.h) counting to 100 steps instead of 40:
// 25 s, long enough for a loss, a restart and a return.
std::string LongerCheckpointedRank() {
  std::string script = test::kCheckpointedRankScript;
  const std::string forty = "-lt 40";
  script.replace(script.find(forty), forty.size(), "-lt 100");
  return script;
}

// A checkpointed rank of 100 steps of 0.25 s on HgxNodes: at step 4 of the first attempt node1's
// GPU falls off the bus (its rank fails, its kernel log gets Xid 79); `also` is more shell run
// at each step.
std::string NodeOneLosesItsGpuRank(const std::string& also) {
  return R"sh(
ck=$DTRAIN_LOG_DIR/checkpoint
s=0; [ -f "$ck" ] && s=$(cat "$ck")
echo "rank $RANK of $WORLD_SIZE on $DTRAIN_NODE starts at step $s"
while [ "$s" -lt 100 ]; do
  sleep 0.25; s=$((s + 1))
  [ "$RANK" = 0 ] && echo "$s" >"$ck.tmp" && mv "$ck.tmp" "$ck"
  if [ "$DTRAIN_NODE" = node1 ] && [ "$s" = 4 ]; then
    echo "[ 5012.345678] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." >>"$(dirname "$(command -v nvidia-smi)")/dmesg.txt"
    exit 1
  fi
)sh" + also +
         R"sh(done
echo "rank $RANK done")sh";
}

TEST(NodeReturn, CutNodeThatAnswersAgainRejoinsTheJob) {
  SshTestCluster cluster("node-return", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-return");
  const std::string script = LongerCheckpointedRank();
  DtrainProcess dtrain({"launch",
                        "-c",
                        cluster.cluster_file(),
                        "--job",
                        "back",
                        "--log-dir",
                        dir,
                        "--node-timeout",
                        "3",
                        "--grace-period",
                        "2",
                        "--max-restarts",
                        "1",
                        "--nnodes",
                        "2:3",
                        "--health-watch",
                        "1",
                        "--quiet",
                        "--",
                        "sh",
                        "-c",
                        script,
                        "nodeloss-rank"},
                       dir);
  const std::string job_dir = dir + "/back";
  ASSERT_TRUE(test::WaitForStep(job_dir, 4)) << dtrain.err();
  cluster.OnNode(1, "ip link set eth0 down");
  const Clock::time_point cut = Clock::now();
  const double lost_s = WaitForText(dtrain, "node node1 lost", cut, 20);
  cluster.OnNode(1, "ip link set eth0 up");
  const Clock::time_point restored = Clock::now();
  const std::string back =
      "dtrain: node node1 passed the health checks 2 rounds in a row; job "
      "back restarts on node0,node1,node2 to take it back (not counted "
      "against --max-restarts)";
  const double back_s = WaitForText(dtrain, back, restored, 40);
  std::printf("node1 cut: lost after %.2f s; link restored: taken back after %.2f s\n", lost_s,
              back_s);
  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  const std::string err = dtrain.err();
  std::printf("%s", err.c_str());
  EXPECT_GE(lost_s, 2.5) << err;
  EXPECT_LE(lost_s, 4) << err;
  // Two rounds a second apart, each a probe of the node (a fresh ssh connection after the cut).
  EXPECT_GE(back_s, 1) << err;
  EXPECT_LE(back_s, 15) << err;
  EXPECT_NE(err.find("dtrain: node node1 quarantined in job back: node node1 lost"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("restarting job back (restart 1 of 1) in 1 s on node0,node2; cause: "
                     "node-lost"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("all 1 restart(s) used"), std::string::npos) << err;

  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 3u) << attempts.dump(2);
  EXPECT_EQ(attempts[0]["cause"], "node-lost");
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2"}));
  EXPECT_EQ(attempts[1]["cause"], "node-returned");
  EXPECT_EQ(attempts[2]["nodes"], json({"node0", "node1", "node2"}));
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(record["world_size"], 3);
  for (const json& node : record["nodes"]) EXPECT_FALSE(node.contains("quarantined")) << node;
  EXPECT_NE(record.dump().find("\"node_returned\""), std::string::npos);

  // node1's rank ran again in the third attempt, from rank 0's checkpoint, to the end.
  const std::string log1 = ReadText(job_dir + "/rank-1.log");
  const size_t again = log1.find("--- dtrain: restart to take node node1 back ---");
  ASSERT_NE(again, std::string::npos) << log1;
  const std::string prefix = "rank 1 of 3 on node1 starts at step ";
  const size_t at = log1.find(prefix, again);
  ASSERT_NE(at, std::string::npos) << log1;
  EXPECT_GT(std::atoi(log1.c_str() + at + prefix.size()), 4) << log1;
  EXPECT_NE(log1.find("rank 1 done", at), std::string::npos) << log1;
  for (int node = 0; node < 3; ++node) {
    for (const std::string& p : cluster.NodeProcesses(node)) {
      EXPECT_EQ(p.find("nodeloss-rank"), std::string::npos) << "node" << node << ": " << p;
    }
  }
}

// node1's GPU falls off the bus at step 4 of the first attempt (its rank fails, its kernel log
// gets Xid 79); the health watch or the check before the restart quarantines it and the job goes
// on with two nodes.
// Then node1 "reboots": its kernel log is fresh. It passes two rounds and is taken back. At step
// 60 node2's rank fails once: with --max-restarts 2 the job restarts a second time, since taking
// node1 back used none of the budget.
TEST(NodeReturn, UnfitNodeFitAgainRejoinsTheJob) {
  SshTestCluster cluster("node-return-unfit", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = test::HgxNodes(cluster, 3);
  const std::string dir = testing::ScratchDirs::Make("node-return-unfit");
  const std::string script = NodeOneLosesItsGpuRank(R"sh(
  if [ "$DTRAIN_NODE" = node2 ] && [ "$s" = 60 ] && [ ! -f "$ck.failed" ]; then
    : >"$ck.failed"
    exit 1
  fi
)sh");
  DtrainProcess dtrain(
      {"launch", "-c", file, "--job", "fixed", "--log-dir", dir, "--max-restarts", "2", "--nnodes",
       "2:3", "--health-watch", "1", "--quiet", "--", "sh", "-c", script, "unfit-rank"},
      dir);
  const Clock::time_point start = Clock::now();
  // The health watch or the check before the restart, whichever sees the Xid first.
  ASSERT_GE(WaitForText(dtrain, "dtrain: node node1 quarantined in job fixed: failed the health ",
                        start, 30),
            0)
      << dtrain.err();
  EXPECT_NE(dtrain.err().find("node node1: Xid 79 on GPU 3"), std::string::npos);
  testing::WriteFile(cluster.dir() + "/node1-bin/dmesg.txt", test::kFreshBootLog);
  const Clock::time_point rebooted = Clock::now();
  const double back_s = WaitForText(dtrain,
                                    "dtrain: node node1 passed the health checks 2 rounds "
                                    "in a row; job fixed restarts on node0,node1,node2",
                                    rebooted, 30);
  std::printf("node1 fit again: taken back after %.2f s\n", back_s);
  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  EXPECT_GE(back_s, 1) << dtrain.err();
  const json record = json::parse(ReadText(dir + "/fixed/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 4u) << attempts.dump(2);
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2"}));
  EXPECT_EQ(attempts[1]["cause"], "node-returned");
  EXPECT_EQ(attempts[2]["nodes"], json({"node0", "node1", "node2"}));
  EXPECT_EQ(attempts[2]["cause"], "error");
  EXPECT_EQ(attempts[3]["nodes"], json({"node0", "node1", "node2"}));
  EXPECT_NE(dtrain.err().find("restarting job fixed (restart 2 of 2) in 2 s on node0,node1,node2"),
            std::string::npos)
      << dtrain.err();
  EXPECT_NE(ReadText(dir + "/fixed/rank-1.log").find("rank 1 done"), std::string::npos);
}

// As above, but node1 comes back cut off from the others where the job's collectives run
// (-x GLOO_SOCKET_IFNAME=hsn0, its switch port on that NIC taken off the bridge with its link up,
// as a port in the wrong VLAN): fit by itself, it fails the peer test with the job's nodes that
// the checks of a returning node take in, and stays out while node0 and node2 run on. Its port
// back on the bridge, it passes twice and the job restarts on all three.
TEST(NodeReturn, ANodeFitAgainButCutOffFromTheOthersStaysOut) {
  SshTestCluster cluster("node-return-cut", 3, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  const std::string file = test::HgxNodes(cluster, 3);
  const std::string dir = testing::ScratchDirs::Make("node-return-cut");
  const std::string script = NodeOneLosesItsGpuRank("");
  DtrainProcess dtrain({"launch",
                        "-c",
                        file,
                        "--job",
                        "cut",
                        "--log-dir",
                        dir,
                        "--max-restarts",
                        "1",
                        "--nnodes",
                        "2:3",
                        "--health-watch",
                        "1",
                        "-x",
                        "GLOO_SOCKET_IFNAME=hsn0",
                        "--quiet",
                        "--",
                        "sh",
                        "-c",
                        script,
                        "cut-rank"},
                       dir);
  const Clock::time_point start = Clock::now();
  ASSERT_GE(WaitForText(dtrain, "dtrain: node node1 quarantined in job cut: failed the health ",
                        start, 30),
            0)
      << dtrain.err();
  ASSERT_EQ(test::SetSecondNicPort(cluster, 1, "nomaster"), "");
  testing::WriteFile(cluster.dir() + "/node1-bin/dmesg.txt", test::kFreshBootLog);
  // Fit by itself, it would pass twice in about 2 s (the interval, and two probes).
  std::this_thread::sleep_for(std::chrono::seconds(8));
  EXPECT_EQ(dtrain.err().find("dtrain: node node1 passed the health checks"), std::string::npos)
      << dtrain.err();
  ASSERT_EQ(test::SetSecondNicPort(cluster, 1, "master br0"), "");
  const Clock::time_point restored = Clock::now();
  const double back_s = WaitForText(dtrain,
                                    "dtrain: node node1 passed the health checks 2 rounds "
                                    "in a row; job cut restarts on node0,node1,node2",
                                    restored, 30);
  std::printf("node1 reachable again: taken back after %.2f s\n", back_s);
  EXPECT_GE(back_s, 0) << dtrain.err();
  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  const json record = json::parse(ReadText(dir + "/cut/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 3u) << attempts.dump(2);
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2"}));
  EXPECT_EQ(attempts[1]["cause"], "node-returned");
  EXPECT_EQ(attempts[2]["nodes"], json({"node0", "node1", "node2"}));
  EXPECT_NE(ReadText(dir + "/cut/rank-1.log").find("rank 1 done"), std::string::npos);
}

// --sync into the nodes' private workdirs (/srv/node/work) while node1's link is down: the job
// starts on node0 and node2, the launch directory copied to those two only. Once node1 answers
// again and passes the health checks twice, the job restarts on all three, and the launch
// directory is copied to node1 before its rank starts there (node0 and node2 are not copied to
// again): its rank finds the synced file in its workdir.
TEST(NodeReturn, ANodeUnreachedAtTheStartIsSyncedBeforeItJoins) {
  SshTestCluster cluster("node-return-sync", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-return-sync");
  const std::string src = SyncedProject(dir);
  const std::string file = PrivateWorkdirs(cluster, ReadText(cluster.cluster_file()));
  cluster.OnNode(1, "ip link set eth0 down");
  DtrainProcess dtrain({"launch",
                        "--sync",
                        "-c",
                        file,
                        "--job",
                        "synced",
                        "--log-dir",
                        dir + "/logs",
                        "--node-timeout",
                        "3",
                        "--nnodes",
                        "2:3",
                        "--health-watch",
                        "1",
                        "--quiet",
                        "--",
                        "sh",
                        "-c",
                        "echo synced=$(cat synced.txt)\n" + LongerCheckpointedRank(),
                        "nodeloss-rank"},
                       src);
  const std::string job_dir = dir + "/logs/synced";
  ASSERT_TRUE(test::WaitForStep(job_dir, 4)) << dtrain.err();
  cluster.OnNode(1, "ip link set eth0 up");
  const std::string back =
      "dtrain: node node1 passed the health checks 2 rounds in a row; job synced restarts on "
      "node0,node1,node2";
  EXPECT_GE(WaitForText(dtrain, back, Clock::now(), 40), 0) << dtrain.err();
  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  const std::string err = dtrain.err();
  for (const char* node : {"node0", "node1", "node2"}) {
    const std::string synced = std::string("dtrain: sync ") + node + " (";
    ASSERT_NE(err.find(synced), std::string::npos) << err;
    EXPECT_EQ(err.find(synced, err.find(synced) + 1), std::string::npos) << "synced once: " << err;
  }
  EXPECT_GT(err.find("dtrain: sync node1 ("), err.find(back)) << err;
  const std::string log1 = ReadText(job_dir + "/rank-1.log");
  EXPECT_NE(log1.find("synced=yes\nrank 1 of 3 on node1 starts at step "), std::string::npos)
      << log1;
  EXPECT_NE(log1.find("rank 1 done"), std::string::npos) << log1;
  EXPECT_EQ(cluster.OnNode(1, "cat /srv/node/work/synced.txt"), "yes\n");
}

// Two nodes, no spare: node1's link is cut and the job, short of nodes, cannot restart at once.
// As torchrun's agents wait at their rendezvous, it waits (--rdzv-conf join_timeout=60) for
// node1 to pass the health checks twice, then restarts on both from the checkpoint and finishes.
// A second job whose node1 never comes back gives up after its join_timeout of 3 s.
TEST(NodeReturn, AJobShortOfNodesWaitsForOneToReturnUpToTheJoinTimeout) {
  SshTestCluster cluster("node-return-wait", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-return-wait");
  auto launch = [&](const std::string& job, const std::string& join_timeout) {
    return std::vector<std::string>{"launch",
                                    "-c",
                                    cluster.cluster_file(),
                                    "--job",
                                    job,
                                    "--log-dir",
                                    dir,
                                    "--node-timeout",
                                    "3",
                                    "--grace-period",
                                    "2",
                                    "--max-restarts",
                                    "1",
                                    "--health-watch",
                                    "1",
                                    "--rdzv-conf",
                                    "join_timeout=" + join_timeout,
                                    "--quiet",
                                    "--",
                                    "sh",
                                    "-c",
                                    LongerCheckpointedRank(),
                                    "nodeloss-rank"};
  };
  DtrainProcess dtrain(launch("waits", "60"), dir);
  ASSERT_TRUE(test::WaitForStep(dir + "/waits", 4)) << dtrain.err();
  cluster.OnNode(1, "ip link set eth0 down");
  const Clock::time_point cut = Clock::now();
  const std::string waiting = "dtrain: job waits is short of nodes (";
  ASSERT_GE(WaitForText(dtrain, waiting, cut, 30), 0) << dtrain.err();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  cluster.OnNode(1, "ip link set eth0 up");
  const Clock::time_point restored = Clock::now();
  const double back_s = WaitForText(dtrain,
                                    "dtrain: node node1 passed the health checks 2 rounds "
                                    "in a row after ",
                                    restored, 40);
  std::printf("node1 restored: taken back after %.2f s\n", back_s);
  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  std::string err = dtrain.err();
  EXPECT_NE(err.find("): it waits up to 60 s (torchrun's join_timeout, --rdzv-conf "
                     "join_timeout=S) for a quarantined node to pass the health checks 2 rounds "
                     "in a row"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("restarting job waits (restart 1 of 1) in "), std::string::npos) << err;
  EXPECT_GE(back_s, 1) << err;
  json record = json::parse(ReadText(dir + "/waits/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  ASSERT_EQ(record["attempts"].size(), 2u) << record["attempts"].dump(2);
  EXPECT_EQ(record["attempts"][0]["cause"], "node-lost");
  EXPECT_EQ(record["attempts"][1]["nodes"], json({"node0", "node1"}));
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_NE(record.dump().find("\"node_returned\""), std::string::npos);
  const std::string log1 = ReadText(dir + "/waits/rank-1.log");
  const size_t again = log1.find("--- dtrain: restart 1");
  ASSERT_NE(again, std::string::npos) << log1;
  EXPECT_NE(log1.find("rank 1 done", again), std::string::npos) << log1;

  // node1 stays cut: the wait runs out.
  DtrainProcess gives_up(launch("gives-up", "3"), dir);
  ASSERT_TRUE(test::WaitForStep(dir + "/gives-up", 4)) << gives_up.err();
  cluster.OnNode(1, "ip link set eth0 down");
  EXPECT_NE(gives_up.Wait(60), 0);
  err = gives_up.err();
  EXPECT_NE(err.find("): it waits up to 3 s (torchrun's join_timeout"), std::string::npos) << err;
  EXPECT_NE(err.find("dtrain: job gives-up cannot restart: "), std::string::npos) << err;
  EXPECT_NE(err.find(", and no node came back within 3 s (torchrun's join_timeout, --rdzv-conf "
                     "join_timeout=S)"),
            std::string::npos)
      << err;
  record = json::parse(ReadText(dir + "/gives-up/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "failed");
  EXPECT_EQ(record["attempts"].size(), 1u);
  cluster.OnNode(1, "ip link set eth0 up");
  for (int node = 0; node < 2; ++node) {
    for (const std::string& p : cluster.NodeProcesses(node)) {
      EXPECT_EQ(p.find("nodeloss-rank"), std::string::npos) << "node" << node << ": " << p;
    }
  }
}

// Two nodes, node1's link cut before the launch: short of nodes at its start, the job waits as
// torchrun's agents do at their first rendezvous (--rdzv-conf join_timeout). node0 is checked
// meanwhile; node1, its link restored, passes the health checks twice, is synced (--sync) and
// the first attempt runs on both. A second job whose node1 never answers gives up after its
// join_timeout of 3 s, no rank started.
TEST(NodeReturn, AJobShortOfNodesAtItsStartWaitsForThemBeforeAnyRankStarts) {
  SshTestCluster cluster("node-return-start", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-return-start");
  const std::string src = SyncedProject(dir);
  // node1 found unreached in 2 s, not 5.
  const std::string file =
      PrivateWorkdirs(cluster, test::WithConnectTimeout(ReadText(cluster.cluster_file()), 2));
  auto launch = [&](const std::string& job, const std::string& join_timeout) {
    return std::vector<std::string>{
        "launch",
        "--sync",
        "-c",
        file,
        "--job",
        job,
        "--log-dir",
        dir + "/logs",
        "--health-watch",
        "1",
        "--rdzv-conf",
        "join_timeout=" + join_timeout,
        "--quiet",
        "--",
        "sh",
        "-c",
        "echo synced=$(cat synced.txt)\n" + std::string(test::kCheckpointedRankScript),
        "nodeloss-rank"};
  };
  cluster.OnNode(1, "ip link set eth0 down");
  DtrainProcess dtrain(launch("waits", "60"), src);
  const Clock::time_point start = Clock::now();
  const std::string waiting = "dtrain: job waits is short of nodes (";
  ASSERT_GE(WaitForText(dtrain, waiting, start, 40), 0) << dtrain.err();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_FALSE(std::filesystem::exists(dir + "/logs/waits/rank-0.log")) << dtrain.err();
  // `dtrain status` says what the job waits for, its ranks not started.
  const testing::DtrainRun status =
      testing::RunDtrain({"status", "--log-dir", dir + "/logs", "--job", "waits"}, dir);
  EXPECT_EQ(status.status, 0) << status.err;
  EXPECT_NE(status.out.find("job waits: waiting (ssh)"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find(" s: job waits is short of nodes (1 healthy node(s) left, the job "
                            "needs at least 2): it waits up to 60 s"),
            std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("node0               - not started"), std::string::npos) << status.out;
  cluster.OnNode(1, "ip link set eth0 up");
  const double back_s =
      WaitForText(dtrain, "dtrain: node node1 passed the health checks 2 rounds in a row after ",
                  Clock::now(), 40);
  std::printf("node1 restored: taken back after %.2f s\n", back_s);
  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  std::string err = dtrain.err();
  EXPECT_NE(err.find("could not be reached at the start"), std::string::npos) << err;
  EXPECT_LT(err.find("dtrain: health check before start: 1 node(s) in "), err.find(waiting)) << err;
  EXPECT_LT(err.find("dtrain: sync node0 ("), err.find(waiting)) << err;
  EXPECT_GT(err.find("dtrain: sync node1 ("), err.find("passed the health checks 2 rounds")) << err;
  json record = json::parse(ReadText(dir + "/logs/waits/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  ASSERT_EQ(record["attempts"].size(), 1u) << record["attempts"].dump(2);
  EXPECT_EQ(record["attempts"][0]["nodes"], json({"node0", "node1"}));
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_NE(record.dump().find("\"node_returned\""), std::string::npos);
  EXPECT_NE(record.dump().find("\"waiting_for_nodes\""), std::string::npos);
  const std::string log1 = ReadText(dir + "/logs/waits/rank-1.log");
  EXPECT_NE(log1.find("synced=yes\nrank 1 of 2 on node1 starts at step 0"), std::string::npos)
      << log1;
  EXPECT_NE(log1.find("rank 1 done"), std::string::npos) << log1;

  // node1 stays cut: the wait runs out before any rank starts.
  cluster.OnNode(1, "ip link set eth0 down");
  DtrainProcess gives_up(launch("gives-up", "3"), src);
  EXPECT_EQ(gives_up.Wait(60), 1) << gives_up.err();
  err = gives_up.err();
  EXPECT_NE(err.find("dtrain: job gives-up cannot start: 1 healthy node(s) left, the job needs at "
                     "least 2, and no node"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find(", and no node came back within 3 s (torchrun's join_timeout, --rdzv-conf "
                     "join_timeout=S); no rank was started."),
            std::string::npos)
      << err;
  record = json::parse(ReadText(dir + "/logs/gives-up/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "failed");
  EXPECT_EQ(record["attempts"].size(), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir + "/logs/gives-up/rank-0.log"));
  cluster.OnNode(1, "ip link set eth0 up");
  for (const std::string& p : cluster.NodeProcesses(0)) {
    EXPECT_EQ(p.find("nodeloss-rank"), std::string::npos) << "node0: " << p;
  }
}

}  // namespace
}  // namespace dtrain
