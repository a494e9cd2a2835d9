// Issue 27: a node dies, the job goes on. Real faults on sshd nodes in network namespaces: a
// node's link is cut (`ip link set eth0 down`) and stays cut. dtrain must name the node lost
// within --node-timeout + 1 s, stop the others, restart without it (a spare in its place, or
// fewer nodes with --nnodes MIN:MAX), resume from the job's checkpoint file and finish; the cut
// node's rank must end by itself (its dead-man switch) while the link is still down.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/checkpointed_rank.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/killed_after_step_seven.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using test::kCheckpointedRankScript;
using test::ReadText;
using test::SshTestCluster;
using test::WaitForStep;
using testing::DtrainProcess;

constexpr double kNodeTimeout = 3;
constexpr const char* kNodeTimeoutArg = "3";
constexpr double kGrace = 2;

bool RankRunsOn(const SshTestCluster& cluster, int node) {
  return !cluster.NodeProcessesWith(node, "nodeloss-rank").empty();
}

struct CutResult {
  double detected_s = -1;   // cut -> "node node1 lost" on dtrain's stderr
  double rank_gone_s = -1;  // cut -> no process of the rank left on the cut node
  double node_idle_s = -1;  // cut -> nothing of dtrain's left there (its heartbeat's echo too)
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
  for (const char* word : {"--", "sh", "-c", kCheckpointedRankScript, "nodeloss-rank"})
    args.push_back(word);
  DtrainProcess dtrain(args, dir);
  const std::string job_dir = dir + "/cut";
  CutResult r;
  EXPECT_TRUE(WaitForStep(job_dir, 4)) << dtrain.err();
  EXPECT_TRUE(RankRunsOn(cluster, 1));
  cluster.OnNode(1, "ip link set eth0 down");
  const auto cut = Clock::now();
  while (Clock::now() - cut < std::chrono::seconds(30) &&
         (r.detected_s < 0 || r.rank_gone_s < 0 || r.node_idle_s < 0)) {
    const double t = std::chrono::duration<double>(Clock::now() - cut).count();
    if (r.detected_s < 0 && dtrain.err().find("node node1 lost") != std::string::npos)
      r.detected_s = t;
    if (r.rank_gone_s < 0 && !RankRunsOn(cluster, 1)) r.rank_gone_s = t;
    if (r.node_idle_s < 0 && cluster.NodeProcessesBesidesSshd(1).empty()) r.node_idle_s = t;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.status = dtrain.Wait(60);
  r.err = dtrain.err();
  cluster.OnNode(1, "ip link set eth0 up");
  r.record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  std::printf(
      "cut node1: lost after %.2f s, its rank gone after %.2f s, nothing left after %.2f s\n%s",
      r.detected_s, r.rank_gone_s, r.node_idle_s, r.err.c_str());
  return r;
}

void ExpectLostAndRecovered(const CutResult& r, const std::vector<std::string>& second_nodes,
                            int world_size) {
  EXPECT_GE(r.detected_s, kNodeTimeout - 0.5) << r.err;
  EXPECT_LE(r.detected_s, kNodeTimeout + 1) << r.err;
  EXPECT_GE(r.rank_gone_s, 0) << "node1's rank still ran 30 s after the cut";
  EXPECT_LE(r.rank_gone_s, kNodeTimeout + 1 + kGrace + 0.5) << r.err;
  // The heartbeat's echo ends within the node timeout and a second of its watch.
  EXPECT_GE(r.node_idle_s, 0) << "dtrain's processes still ran on node1 30 s after the cut";
  EXPECT_LE(r.node_idle_s, kNodeTimeout + 1 + kGrace + 1.5) << r.err;
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

  // node1's link is up again and it passes every check, but a job of this log dir lost it a
  // moment ago: the next job holds it back as the spare, node3 in its place (a scheduler drains
  // such a node); --hold-back 0 picks as the cluster file says.
  const std::vector<std::string> job = {"--", "sh", "-c", "echo rank $RANK on $DTRAIN_NODE"};
  std::vector<std::string> next = {
      "launch", "-c",     cluster.cluster_file(), "--job", "next", "--log-dir", dir, "--spares",
      "1",      "--quiet"};
  next.insert(next.end(), job.begin(), job.end());
  const testing::DtrainRun held = testing::RunDtrain(next, dir);
  std::printf("the next job:\n%s", held.err.c_str());
  EXPECT_EQ(held.status, 0) << held.err;
  EXPECT_NE(held.err.find("dtrain: node node1 held back as a spare (node3 runs in its place): job "
                          "cut quarantined it "),
            std::string::npos)
      << held.err;
  EXPECT_NE(held.err.find("s ago: node node1 lost: no answer for 3 s"), std::string::npos)
      << held.err;
  EXPECT_NE(held.err.find("spare node(s), used once a node is quarantined: node1\n"),
            std::string::npos)
      << held.err;
  const json record = json::parse(ReadText(dir + "/next/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << held.err;
  EXPECT_EQ(record["attempts"][0]["nodes"], json({"node0", "node2", "node3"}));
  EXPECT_EQ(record["nodes"][1].value("spare", false), true) << record["nodes"].dump(2);
  int held_back_events = 0;
  for (const json& e : record["events"]) held_back_events += e.value("kind", "") == "held_back";
  EXPECT_EQ(held_back_events, 1) << record["events"].dump(2);

  const testing::DtrainRun said =
      testing::RunDtrain({"status", "--log-dir", dir, "--job", "next"}, dir);
  EXPECT_NE(said.out.find("\nnode node1 held back as a spare (node3 runs in its place): job cut "),
            std::string::npos)
      << said.out << said.err;

  // The doctor names node1 too, as a warning (it passes every check now), with the job to look
  // into; node0 was never quarantined.
  const std::string with_logs = dir + "/cluster-logs.yaml";
  testing::WriteFile(with_logs, ReadText(cluster.cluster_file()) + "log_dir: " + dir + "\n");
  const testing::DtrainRun doctor = testing::RunDtrain({"doctor", "-c", with_logs}, dir);
  EXPECT_NE(doctor.out.find("node node1: job cut quarantined it "), std::string::npos)
      << doctor.out << doctor.err;
  EXPECT_NE(doctor.out.find("dtrain status --job cut"), std::string::npos) << doctor.out;
  EXPECT_EQ(doctor.out.find("node node0: job "), std::string::npos) << doctor.out;

  // The cluster file's job.hold_back 0 does what --hold-back 0 does (and the flag wins over it);
  // the doctor, reading the same window, names nobody.
  const std::string no_hold = dir + "/cluster-no-hold.yaml";
  testing::WriteFile(no_hold, ReadText(with_logs) + "job: {hold_back: 0}\n");
  const testing::DtrainRun quiet = testing::RunDtrain({"doctor", "-c", no_hold}, dir);
  EXPECT_EQ(quiet.out.find("quarantined it"), std::string::npos) << quiet.out;
  for (const std::string& flag : {std::string(), std::string("--hold-back")}) {
    std::vector<std::string> args = next;
    args[2] = no_hold;
    args[4] = flag.empty() ? "next-file" : "next-flag";
    if (!flag.empty()) args.insert(args.begin() + 9, {flag, "86400"});
    const testing::DtrainRun run = testing::RunDtrain(args, dir);
    EXPECT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.err.find("held back") == std::string::npos, flag.empty()) << flag << run.err;
  }

  next[4] = "next-0";
  next.insert(next.begin() + 9, {"--hold-back", "0"});
  const testing::DtrainRun picked = testing::RunDtrain(next, dir);
  EXPECT_EQ(picked.status, 0) << picked.err;
  EXPECT_EQ(picked.err.find("held back"), std::string::npos) << picked.err;
  const json record0 = json::parse(ReadText(dir + "/next-0/job.json"), nullptr, false);
  ASSERT_TRUE(record0.is_object()) << picked.err;
  EXPECT_EQ(record0["attempts"][0]["nodes"], json({"node0", "node1", "node2"}));
}

TEST(NodeLoss, NnodesMinMaxGoesOnWithFewerNodes) {
  SshTestCluster cluster("node-loss-shrink", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-loss-shrink");
  const CutResult r = RunAndCut(cluster, dir, {"--nnodes", "2:3"});
  ExpectLostAndRecovered(r, {"node0", "node2"}, 2);
  ExpectResumed(dir + "/cut", 2);

  // The next job has no spare to hold node1 back with: node1 runs, and the console says so.
  const testing::DtrainRun next =
      testing::RunDtrain({"launch", "-c", cluster.cluster_file(), "--job", "next", "--log-dir", dir,
                          "--quiet", "--", "sh", "-c", "echo rank $RANK on $DTRAIN_NODE"},
                         dir);
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_NE(next.err.find("dtrain: node node1 runs though job cut quarantined it "),
            std::string::npos)
      << next.err;
  const json record = json::parse(ReadText(dir + "/next/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << next.err;
  EXPECT_EQ(record["attempts"][0]["nodes"], json({"node0", "node1", "node2"}));
}

// Short of nodes, the job waits for node1 to come back (torchrun's join_timeout, 2 s here); it
// stays cut, and the job fails with the reason.
TEST(NodeLoss, BelowMinimumTheJobFailsWithTheReason) {
  SshTestCluster cluster("node-loss-min", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-loss-min");
  const CutResult r = RunAndCut(cluster, dir, {"--rdzv-conf", "join_timeout=2"});
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("cannot restart: 2 healthy node(s) left, the job needs at least 3, and no "
                       "node came back within 2 s"),
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
  const std::string logs = test::FreshPrivateFolder("node-loss-private");
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

// A node whose sshd is gone before the launch (connection refused) is set aside when a spare
// can take its place; without one the job waits for it before any rank starts, as torchrun's
// first rendezvous waits for its nodes, and gives up at its join_timeout.
TEST(NodeLoss, NodeUnreachableAtTheStartIsReplacedByTheSpare) {
  SshTestCluster cluster("node-start-unreached", 4, 1);
  if (!cluster.error().empty()) GTEST_SKIP() << cluster.error();
  test::RunOutput("kill -KILL $(cat " + cluster.dir() + "/node1/sshd.pid)");
  const std::string dir = testing::ScratchDirs::Make("node-start-unreached");
  auto launch = [&](const std::string& job, const std::string& spares) {
    DtrainProcess dtrain({"launch", "-c", cluster.cluster_file(), "--job", job, "--log-dir", dir,
                          "--spares", spares, "--rdzv-conf", "join_timeout=1", "--quiet", "--",
                          "sh", "-c", "echo \"rank $RANK on $DTRAIN_NODE\""},
                         dir);
    const int status = dtrain.Wait(60);
    std::printf("%s", dtrain.err().c_str());
    return std::make_pair(status, dtrain.err());
  };
  const auto [status, err] = launch("spare", "1");
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: node node1 quarantined in job spare: could not be "
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

  // No spare: short of nodes, the job waits for node1 (its join_timeout of 1 s), then gives up.
  const auto [no_spare_status, no_spare_err] = launch("nospare", "0");
  EXPECT_EQ(no_spare_status, 1) << no_spare_err;
  EXPECT_NE(no_spare_err.find("dtrain: job nospare cannot start: 3 healthy node(s) left, the job "
                              "needs at least 4, and no node came back within 1 s (torchrun's "
                              "join_timeout, --rdzv-conf join_timeout=S); no rank was started"),
            std::string::npos)
      << no_spare_err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/nospare/rank-0.log"));
}

// dtrain itself held up (SIGSTOP for 4 s, as a starved or blocked launcher would be): its
// heartbeats go out late, which it says, since every node's dead-man switch ends the ranks once
// they are late by the whole --node-timeout; shorter than that, the rank lives on and finishes.
TEST(NodeLoss, DtrainHeldUpSaysItsHeartbeatsWentOutLate) {
  SshTestCluster cluster("held-up", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("held-up");
  DtrainProcess dtrain({"launch", "-c", cluster.cluster_file(), "--job", "held", "--log-dir", dir,
                        "--node-timeout", "6", "--health-watch", "0", "--start-health-check", "off",
                        "-q", "--", "sh", "-c", "echo started; sleep 8; echo finished"},
                       dir);
  const std::string log = dir + "/held/rank-0.log";
  ASSERT_TRUE(
      testing::WaitFor([&] { return ReadText(log).find("started") != std::string::npos; }, 30))
      << dtrain.err();
  dtrain.Signal(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  dtrain.Signal(SIGCONT);
  ASSERT_EQ(dtrain.Wait(60), 0) << dtrain.err();
  EXPECT_NE(dtrain.err().find("dtrain: warning: heartbeats to the nodes went out "),
            std::string::npos)
      << dtrain.err();
  EXPECT_NE(dtrain.err().find(" s late (dtrain was held up); a node that hears none for "
                              "--node-timeout 6 s ends its ranks"),
            std::string::npos)
      << dtrain.err();
  EXPECT_NE(ReadText(log).find("finished"), std::string::npos) << ReadText(log);
}

}  // namespace
}  // namespace dtrain
