// Nodes whose network is unfit for the job's collectives, on real sshd nodes in network
// namespaces, each with a second NIC (hsn0) on the bridge for a real torch.distributed Gloo job
// (-x GLOO_SOCKET_IFNAME=hsn0): a switch port down (the interface rule) or taken off the bridge
// with its link up, as a port moved to another VLAN (the peer test), before the start and while
// the job runs (the health watch, whose peer test checks every pair or, on more nodes, a few pairs
// a round), each with a spare to take the unfit node's place.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dtrain_process.h"
#include "tests/support/hanging_torch.h"
#include "tests/support/launch_run.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using test::LaunchRun;
using test::ReadText;
using test::RunToTheEnd;
using test::SecondsUntilSaid;
using test::SshTestCluster;
using testing::DtrainProcess;

// A real Gloo job all-reducing over a second NIC (-x GLOO_SOCKET_IFNAME=hsn0: every node of
// `cluster` needs its hsn0, AddSecondNic) for 60 steps of 0.1 s, rank 0 printing the sum every
// 5th step, with one spare, --health-watch 1 and one restart. At its step 10 node1's switch port
// is set `port_state` (SetSecondNicPort); with `during_peer_test`, once a watch round's peer test
// runs on node1 and before it listens. `r` gets how long after that dtrain
// said a node failed the health watch (looked for at most `said_within_s`), its status, what it
// said and job.json.
void RunAllReduceAndSetNode1sPort(const SshTestCluster& cluster, const std::string& dir,
                                  const std::string& job, const std::string& port_state,
                                  double said_within_s, LaunchRun& r,
                                  bool during_peer_test = false) {
  const char* script =
      "import os, time, torch, torch.distributed as dist\n"
      "dist.init_process_group('gloo')\n"
      "for step in range(1, 61):\n"
      "    t = torch.ones(4)\n"
      "    dist.all_reduce(t)\n"
      "    if dist.get_rank() == 0 and step % 5 == 0:\n"
      "        print('step', step, 'sum', t[0].item(), flush=True)\n"
      "    time.sleep(0.1)\n"
      "dist.destroy_process_group()\n";
  DtrainProcess dtrain({"launch",
                        "-c",
                        cluster.cluster_file(),
                        "--job",
                        job,
                        "--log-dir",
                        dir,
                        "--spares",
                        "1",
                        "--max-restarts",
                        "1",
                        "--health-watch",
                        "1",
                        "--grace-period",
                        "2",
                        "-x",
                        "GLOO_SOCKET_IFNAME=hsn0",
                        "--quiet",
                        "--",
                        testing::kVenvPython,
                        "-c",
                        script},
                       dir);
  const std::string log = dir + "/" + job + "/rank-0.log";
  const auto until = Clock::now() + std::chrono::seconds(60);
  while (ReadText(log).find("step 10 ") == std::string::npos && Clock::now() < until &&
         dtrain.running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(ReadText(log).find("step 10 "), std::string::npos) << dtrain.err() << ReadText(log);
  if (during_peer_test) {
    // A watch round's peer test caught on node1 before it listens (its Python stopped the moment
    // it is seen, its program text naming "dtrain-peers"; one already listening may have been
    // reached by node0, and is let go for the next round's): the port goes down while it is
    // stopped, and it goes on.
    const auto within = Clock::now() + std::chrono::seconds(30);
    bool caught = false;
    while (!caught && Clock::now() < within && dtrain.running()) {
      std::string pid;
      for (const std::string& p : cluster.NodeProcesses(1)) {
        if (p.find("dtrain-peers") != std::string::npos) pid = p.substr(0, p.find(' '));
      }
      if (pid.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      if (kill(std::stoi(pid), SIGSTOP) != 0) continue;  // ended already
      caught = cluster.OnNode(1, "ss -Hltnp").find("pid=" + pid + ",") == std::string::npos;
      if (caught) {
        EXPECT_EQ(test::SetSecondNicPort(cluster, 1, port_state), "");
      }
      kill(std::stoi(pid), SIGCONT);
      if (!caught) {  // until this round's test is over
        while (kill(std::stoi(pid), 0) == 0 && Clock::now() < within) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
      }
    }
    ASSERT_TRUE(caught) << "no peer test caught on node1 before it listened within 30 s: "
                        << dtrain.err();
  } else {
    EXPECT_EQ(test::SetSecondNicPort(cluster, 1, port_state), "");
  }
  r.detected_s = SecondsUntilSaid(dtrain, "failed the health watch", said_within_s);
  r.status = dtrain.Wait(120);
  r.err = dtrain.err();
  r.record = json::parse(ReadText(dir + "/" + job + "/job.json"), nullptr, false);
  std::printf("node1's port %s: found after %.2f s\n%s", port_state.c_str(), r.detected_s,
              r.err.c_str());
}

// `dtrain launch` of a real Gloo job (`script`, run by the venv's Python) over each node's second
// NIC (-x GLOO_SOCKET_IFNAME=hsn0) on `cluster`, its last node a spare, as job `job` in `dir`;
// `extra` options before the command.
LaunchRun RunGlooJobOverHsn0(const SshTestCluster& cluster, const std::string& dir,
                             const std::string& job, const std::string& script,
                             const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {
      "launch", "-c", cluster.cluster_file(),    "--job",  job, "--log-dir", dir, "--spares",
      "1",      "-x", "GLOO_SOCKET_IFNAME=hsn0", "--quiet"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const std::string& word :
       {std::string("--"), testing::kVenvPython, std::string("-c"), script})
    args.push_back(word);
  return RunToTheEnd(args, dir, job, 120);
}

// The twin of a checked run: the same job without the check before the start (--hold-back 0
// too, or node1, quarantined by the job before, would wait as the spare) runs on node0 and node1
// and fails in Gloo's init over node1's link.
void ExpectUncheckedRunFailsInGlooInit(const SshTestCluster& cluster, const std::string& dir,
                                       const std::string& job, const std::string& script) {
  const LaunchRun off = RunGlooJobOverHsn0(cluster, dir, job, script,
                                           {"--start-health-check", "off", "--hold-back", "0"});
  EXPECT_NE(off.status, 0) << off.err;
  ASSERT_TRUE(off.record.is_object()) << off.err;
  EXPECT_EQ(off.record["attempts"][0]["nodes"], json({"node0", "node1"}));
  EXPECT_EQ(ReadText(dir + "/" + job + "/rank-0.log").find("sum 3.0"), std::string::npos);
  EXPECT_NE(off.err.find("Gloo connectFullMesh failed"), std::string::npos) << off.err;
}

// A real Gloo job over a second NIC (-x GLOO_SOCKET_IFNAME=hsn0) on two nodes and a spare, node1's
// switch port off the bridge with its link up (a port in the wrong VLAN): the interface rule sees
// nothing wrong. Two nodes that cannot connect are one pair, blamed on neither; the check before
// the start takes the idle spare into the peer test as a witness, which connects with node0 and
// not with node1: node1 alone is quarantined, the spare takes its place, and the pick is checked
// again. Its twin without the check runs on node1 and fails in Gloo's init.
TEST(UnfitNode, NodeCutOffOnTheJobsInterfaceIsReplacedByTheSpare) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  SshTestCluster cluster("node-peers", 3, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  EXPECT_EQ(test::SetSecondNicPort(cluster, 1, "nomaster"), "");
  const std::string dir = testing::ScratchDirs::Make("node-peers");
  const std::string script =
      "import datetime, torch, torch.distributed as dist\n"
      "dist.init_process_group('gloo', timeout=datetime.timedelta(seconds=5))\n"
      "t = torch.ones(4) * (dist.get_rank() + 1)\n"
      "dist.all_reduce(t)\n"
      "print('sum', t[0].item(), 'over', dist.get_world_size())\n"
      "dist.destroy_process_group()\n";
  const LaunchRun r = RunGlooJobOverHsn0(cluster, dir, "peers", script);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined in job peers: failed the health check "
                       "before start: node node1 (10.232.0.11) cannot connect with any of the "
                       "other 2 node(s) over hsn0 (GLOO_SOCKET_IFNAME), which connect with each "
                       "other"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("health check before start: 2 node(s) in "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unfit: node1\ndtrain: health check before start: 2 node(s) in "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("node node0 quarantined"), std::string::npos) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 1u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["nodes"], json({"node0", "node2"}));
  EXPECT_NE(ReadText(dir + "/peers/rank-0.log").find("sum 3.0 over 2\n"), std::string::npos)
      << ReadText(dir + "/peers/rank-0.log");

  // Its twin without the check: the job runs on node1 and fails in Gloo's init.
  ExpectUncheckedRunFailsInGlooInit(cluster, dir, "peers-off", script);
}

// A real Gloo job told to use a second NIC (-x GLOO_SOCKET_IFNAME=hsn0) whose switch port is down
// on node1: the check before the start finds node1's link down and the spare takes its place, and
// torch.distributed's all_reduce runs over hsn0 on node0 and node2. Without the check node1's
// rank waits in Gloo's connect until its timeout ends the job.
TEST(UnfitNode, NodeWhoseNicForGlooIsDownIsReplacedByTheSpare) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  SshTestCluster cluster("node-nic", 3, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  EXPECT_EQ(test::SetSecondNicPort(cluster, 1, "down"), "");
  const std::string dir = testing::ScratchDirs::Make("node-nic");
  const char* script =
      "import torch, torch.distributed as dist\n"
      "dist.init_process_group('gloo')\n"
      "t = torch.ones(4) * (dist.get_rank() + 1)\n"
      "dist.all_reduce(t)\n"
      "print('sum', t[0].item(), 'over', dist.get_world_size())\n"
      "dist.destroy_process_group()\n";
  const LaunchRun r = RunGlooJobOverHsn0(cluster, dir, "nic", script);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined in job nic: failed the health check before "
                       "start: node node1: GLOO_SOCKET_IFNAME=hsn0: the link of hsn0 is down"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 1u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["nodes"], json({"node0", "node2"}));
  EXPECT_NE(ReadText(dir + "/nic/rank-0.log").find("sum 3.0 over 2\n"), std::string::npos)
      << ReadText(dir + "/nic/rank-0.log");

  // Its twin without the check (and Gloo given 5 s instead of 30 minutes): the job runs on node1
  // and fails in Gloo's init over node1's dead link.
  const std::string script_5s = std::string(script).replace(
      std::string(script).find("init_process_group('gloo')"), 26,
      "init_process_group('gloo', timeout=__import__('datetime').timedelta(seconds=5))");
  ExpectUncheckedRunFailsInGlooInit(cluster, dir, "nic-off", script_5s);
}

// The same NIC going down while the job runs: a real Gloo job all-reduces over hsn0 on node0 and
// node1 (node2 the spare) when node1's switch port goes down (`during_peer_test`: while a watch
// round's peer test runs, RunAllReduceAndSetNode1sPort). Gloo's connections then stall without
// an error (no reset comes over a dead link), for minutes: until Gloo's timeout (30 by default)
// or the stall watch's (5). The health watch (every second here) finds node1's link down within
// seconds, stops the attempt and quarantines node1, and the restart runs on node0 and the spare.
void ExpectNicGoingDownFoundByTheHealthWatch(const std::string& name, bool during_peer_test) {
  SshTestCluster cluster(name, 3, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  const std::string dir = testing::ScratchDirs::Make(name);
  LaunchRun r;
  ASSERT_NO_FATAL_FAILURE(
      RunAllReduceAndSetNode1sPort(cluster, dir, "nicw", "down", 20, r, during_peer_test));
  EXPECT_GE(r.detected_s, 0) << r.err;
  // The interval (1 s) and a round's probe; a port that goes down while a round's peer test runs
  // (which a port set down at any moment may too) also the test's wait for its connections (5 s)
  // and a second probe.
  EXPECT_LE(r.detected_s, 8) << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  // node1 alone, by its link: not node0 and node1 as a pair that cannot connect (every rank
  // stopped, the check before the restart left to tell which).
  EXPECT_NE(r.err.find("dtrain: node node1 failed the health watch "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined in job nicw: failed the health watch "
                       "during the run: node node1: GLOO_SOCKET_IFNAME=hsn0: the link of hsn0 is "
                       "down"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 2u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["cause"], "unhealthy");
  EXPECT_EQ(r.record["attempts"][1]["nodes"], json({"node0", "node2"}));
  EXPECT_NE(ReadText(dir + "/nicw/rank-0.log").find("step 60 sum 2.0"), std::string::npos);
}

TEST(UnfitNode, NicGoingDownDuringTheRunIsFoundByTheHealthWatch) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  ExpectNicGoingDownFoundByTheHealthWatch("node-nic-watch", false);
}

// The port going down while the watch's peer test runs: the test's connections between node0 and
// node1 time out, and the pair they name is judged again on a fresh probe of the nodes, which
// finds node1's link down; not the pair.
TEST(UnfitNode, NicGoingDownWhileThePeerTestRunsIsBlamedOnItsNode) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  ExpectNicGoingDownFoundByTheHealthWatch("node-nic-peer", true);
}

// A node cut off while the job runs with its link up (its switch port taken off the bridge, as a
// port moved to another VLAN): a real Gloo job all-reduces over hsn0 on node0, node1 and node2
// (node3 the spare). Gloo's connections stall without an error; the interface rule sees hsn0 up.
// The health watch's peer test (every second here) finds node1 connecting with neither other
// node while they connect with each other, stops the attempt and quarantines node1 alone, and the
// restart runs on node0, node2 and the spare.
TEST(UnfitNode, NodeCutOffDuringTheRunIsFoundByTheHealthWatchsPeerTest) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  SshTestCluster cluster("node-peers-watch", 4, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  const std::string dir = testing::ScratchDirs::Make("node-peers-watch");
  LaunchRun r;
  ASSERT_NO_FATAL_FAILURE(RunAllReduceAndSetNode1sPort(cluster, dir, "peersw", "nomaster", 30, r));
  const double detected_s = r.detected_s;
  const int status = r.status;
  const std::string& err = r.err;
  const json& record = r.record;
  EXPECT_GE(detected_s, 0) << err;
  // A port going off between two of a round's connections leaves some of node1's pairs made:
  // that round names a pair, which is probed and tested once more (5 s of retries each round).
  EXPECT_LE(detected_s, 15) << "the interval (1 s), at most two probes and two rounds of the peer "
                               "test's 5 s of retries: "
                            << err;
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: node node1 failed the health watch "), std::string::npos) << err;
  EXPECT_NE(err.find("node node1 (10.232.0.11) cannot connect with any of the other 2 node(s) "
                     "over hsn0 (GLOO_SOCKET_IFNAME)"),
            std::string::npos)
      << err;
  ASSERT_TRUE(record.is_object()) << err;
  ASSERT_EQ(record["attempts"].size(), 2u) << record.dump(2);
  EXPECT_EQ(record["attempts"][0]["cause"], "unhealthy");
  EXPECT_EQ(record["attempts"][0]["blamed_node"], "node1");
  EXPECT_EQ(record["attempts"][1]["nodes"], json({"node0", "node2", "node3"}));
  EXPECT_NE(ReadText(dir + "/peersw/rank-0.log").find("step 60 sum 3.0"), std::string::npos);
}

// The same on two nodes and a spare: node1 cut off while the job runs on node0 and node1. Two
// nodes that cannot connect are one pair: the watch stops the attempt and names both, quarantining
// neither; the check before the restart takes the idle spare in as a witness, which connects with
// node0 and not node1, so node1 alone is quarantined and the restart runs on node0 and the spare.
TEST(UnfitNode, PairCutOffDuringTheRunIsBlamedByTheCheckBeforeTheRestart) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  SshTestCluster cluster("node-pair-watch", 3, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  const std::string dir = testing::ScratchDirs::Make("node-pair-watch");
  LaunchRun r;
  ASSERT_NO_FATAL_FAILURE(RunAllReduceAndSetNode1sPort(cluster, dir, "pairw", "nomaster", 30, r));
  const double detected_s = r.detected_s;
  const int status = r.status;
  const std::string& err = r.err;
  const json& record = r.record;
  EXPECT_GE(detected_s, 0) << err;
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: nodes node0, node1 failed the health watch "), std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node node1 quarantined in job pairw: failed the health check "
                     "before restart: node node1 (10.232.0.11) cannot connect with any of the "
                     "other 2 node(s)"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("node node0 quarantined"), std::string::npos) << err;
  ASSERT_TRUE(record.is_object()) << err;
  ASSERT_EQ(record["attempts"].size(), 2u) << record.dump(2);
  EXPECT_EQ(record["attempts"][0]["cause"], "unhealthy");
  EXPECT_TRUE(record["attempts"][0]["blamed_node"].is_null()) << record.dump(2);  // neither
  EXPECT_EQ(record["attempts"][1]["nodes"], json({"node0", "node2"}));
  EXPECT_NE(ReadText(dir + "/pairw/rank-0.log").find("step 60 sum 2.0"), std::string::npos);
}

// The health watch's peer test on more nodes than a round tests all pairs of: six nodes of a job
// and a spare, each with hsn0, and DTRAIN_PROBE_PEERS_PARTNERS: 2 in the cluster file's env (each
// node connects to its next in the ring and one more, at an offset that moves each round). While
// the job runs, node4's switch port is taken off the bridge with its link up: the next round names
// node4 alone from the few pairs it tested, the attempt stops, node4 is quarantined and the
// restart runs on the other five and the spare. The job is a shell (no torch): the watch looks at
// the nodes, whatever runs on them.
TEST(UnfitNode, NodeCutOffIsFoundByAWatchRoundThatTestsAFewPairs) {
  SshTestCluster cluster("node-peers-plan", 7, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  const std::string dir = testing::ScratchDirs::Make("node-peers-plan");
  const std::string file = dir + "/cluster.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file())
                      << "env: {DTRAIN_PROBE_PEERS_PARTNERS: 2, GLOO_SOCKET_IFNAME: hsn0}\n";
  // The first attempt waits for the fault; the restart's ends at once.
  const char* script =
      "[ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && sleep 90; echo attempt "
      "$TORCHELASTIC_RESTART_COUNT done";
  DtrainProcess dtrain({"launch", "-c",
                        file,     "--job",
                        "plan",   "--log-dir",
                        dir,      "--spares",
                        "1",      "--max-restarts",
                        "1",      "--health-watch",
                        "1",      "--grace-period",
                        "2",      "--quiet",
                        "--",     "sh",
                        "-c",     script},
                       dir);
  // A few rounds of the watch on the healthy nodes first: none of them names anyone.
  std::this_thread::sleep_for(std::chrono::seconds(6));
  ASSERT_TRUE(dtrain.running()) << dtrain.err();
  EXPECT_EQ(dtrain.err().find("failed the health watch"), std::string::npos) << dtrain.err();
  EXPECT_EQ(test::SetSecondNicPort(cluster, 4, "nomaster"), "");
  const double detected_s = SecondsUntilSaid(dtrain, "failed the health watch", 30);
  const int status = dtrain.Wait(120);
  const std::string err = dtrain.err();
  std::printf("node4's port off the bridge: found after %.2f s\n%s", detected_s, err.c_str());
  EXPECT_GE(detected_s, 0) << err;
  EXPECT_LE(detected_s, 15) << "the interval (1 s), at most two probes and two rounds of the peer "
                               "test's 5 s of retries: "
                            << err;
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: node node4 failed the health watch "), std::string::npos) << err;
  EXPECT_NE(err.find("node node4 (10.232.0.14) cannot connect with any of the "), std::string::npos)
      << err;
  EXPECT_NE(err.find(" node(s) it was tested with over hsn0 (GLOO_SOCKET_IFNAME), which connect "
                     "with others: "),
            std::string::npos)
      << err;
  const json record = json::parse(ReadText(dir + "/plan/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << err;
  ASSERT_EQ(record["attempts"].size(), 2u) << record.dump(2);
  EXPECT_EQ(record["attempts"][0]["cause"], "unhealthy");
  EXPECT_EQ(record["attempts"][0]["blamed_node"], "node4");
  EXPECT_EQ(record["attempts"][1]["nodes"],
            json({"node0", "node1", "node2", "node3", "node5", "node6"}));
  EXPECT_NE(ReadText(dir + "/plan/rank-0.log").find("attempt 1 done"), std::string::npos);
}

}  // namespace
}  // namespace dtrain
