// What a rank leaves on an SSH node ends with it: its processes in a group or session of their
// own, a daemon with an environment of its own (in the rank's cgroup, or handed to its wrapper),
// and all of it once dtrain is killed or its connection drops (after the grace period), across
// namespace nodes.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <string>

#include "tests/support/dtrain_process.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/ssh_launch_run.h"

namespace dtrain {
namespace {

using test::ClusterFileWith;
using test::Launch;
using test::LaunchResult;
using test::ReadText;
using test::SshTestCluster;

// Every rank runs `leave` (what it leaves behind, ending in '&'), then rank 1 fails (exit 3 a
// second later) while the others wait: the job "fail" in `cluster`'s log folder.
LaunchResult LaunchLeavingThenFailing(const SshTestCluster& cluster, const std::string& leave) {
  return Launch("-c " + cluster.cluster_file() + " --log-dir " + cluster.dir() + "/logs" +
                " --job fail -q --grace-period 2 -- sh -c '" + leave +
                " if [ $RANK = 1 ]; then sleep 1; exit 3; fi; wait'");
}

TEST(SshLaunch, ARankFailingOnNodeTwoStopsEveryNodeAndLeavesNothing) {
  SshTestCluster cluster("dl-fail", 3, 2);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  const LaunchResult r = Launch(
      "-c " + cluster.cluster_file() + " --log-dir " + logs + " --job fail -q --grace-period 2 " +
      "-- sh -c 'echo started; if [ $RANK = 5 ]; then sleep 1; echo dying; exit 3; fi; "
      "sleep 300 & wait'");
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_LT(r.seconds, 8) << r.output;
  EXPECT_EQ(ReadText(logs + "/fail/rank-5.log"), "started\ndying\n");
  EXPECT_EQ(ReadText(logs + "/fail/rank-0.log"), "started\n");
  EXPECT_EQ(cluster.LeftoverProcesses(3, 3), "");
}

TEST(SshLaunch, KillingDtrainLeavesNoProcessOnAnyNode) {
  SshTestCluster cluster("dl-kill", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  testing::DtrainProcess dtrain(
      {"launch", "-q", "-c", cluster.cluster_file(), "--log-dir", logs, "--", "sleep", "300"},
      cluster.dir());
  ASSERT_TRUE(cluster.WaitForCommandOnNodes(3, "sleep 300", 10)) << "the job never started";
  dtrain.Signal(SIGKILL);
  dtrain.Wait();
  EXPECT_EQ(cluster.LeftoverProcesses(3, 3), "");
}

// timeout(1) runs its command in a process group of its own, which a signal to the rank's group
// misses, and a daemon leaves the rank's session (setsid): what a rank started either way ends
// with the rank all the same, whether the rank fails (rank 1: its timeout and daemon are left
// behind when it exits), is stopped (rank 0, when rank 1 failed) or dtrain is killed (the node's
// end of the connection closes).
TEST(SshLaunch, ARanksProcessInAGroupOrSessionOfItsOwnEndsWithTheRank) {
  SshTestCluster cluster("dl-pgrp", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  const LaunchResult r =
      LaunchLeavingThenFailing(cluster, "timeout 300 sleep 301 & setsid sleep 303 &");
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");

  testing::DtrainProcess dtrain(
      {"launch", "-q", "-c", cluster.cluster_file(), "--log-dir", logs, "--job", "killed", "--",
       "sh", "-c", "setsid sleep 304 & timeout 300 sleep 302; true"},
      cluster.dir());
  ASSERT_TRUE(cluster.WaitForCommandOnNodes(2, "sleep 302", 10)) << "the job never started";
  ASSERT_TRUE(cluster.WaitForCommandOnNodes(2, "sleep 304", 10)) << "no daemon started";
  dtrain.Signal(SIGKILL);
  dtrain.Wait();
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");

  // Two ranks on one node: rank 1's end takes its own daemon, not rank 0's.
  const std::string file = ClusterFileWith(cluster, "");
  std::string text = ReadText(file);
  const size_t slots = text.find("slots: 1");
  ASSERT_NE(slots, std::string::npos) << text;
  text.replace(slots, 8, "slots: 2");
  std::ofstream(file) << text;
  const LaunchResult two =
      Launch("-c " + file + " --nnodes 1 --log-dir " + logs + " --job two -q " +
             "-- sh -c 'setsid sleep 305 & d=$!; if [ $RANK = 1 ]; then exit 0; fi; sleep 3; "
             "kill -0 $d && echo daemon-alive'");
  EXPECT_EQ(two.status, 0) << two.output;
  EXPECT_EQ(ReadText(logs + "/two/rank-0.log"), "daemon-alive\n") << two.output;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");
}

// Without a cgroup (the nodes mount none), a daemon that left the rank's session and replaced its
// environment (setsid env -i) is handed to the rank's wrapper, its subreaper, once its parent
// ends: it ends with the rank, with what it started in its session, whether another rank failed
// (rank 1: its daemon is handed over as it exits; rank 0's is still its shell's) or the rank
// itself ended well.
TEST(SshLaunch, ADaemonWithAnEnvironmentOfItsOwnEndsWithTheRankWithoutCgroups) {
  SshTestCluster cluster("dl-reaper", 2, 1);
  REQUIRE_CLUSTER(cluster);
  ASSERT_EQ(cluster.OnNode(0, "grep -c ' cgroup2 ' /proc/self/mounts"), "0\n")
      << "the nodes were to have no cgroup v2 hierarchy";
  const std::string logs = cluster.dir() + "/logs";
  const LaunchResult failed =
      LaunchLeavingThenFailing(cluster, "setsid env -i sh -c \"sleep 316 & sleep 317\" &");
  EXPECT_EQ(failed.status, 3) << failed.output;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");

  const LaunchResult ended =
      Launch("-c " + cluster.cluster_file() + " --log-dir " + logs +
             " --job ended -q -- sh -c 'setsid env -i sh -c \"sleep 318 & sleep 319\" &'");
  EXPECT_EQ(ended.status, 0) << ended.output;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");
}

// Each node's sshd in a cgroup of its own, below the cgroup v2 hierarchy the node mounted, for
// the life of a test; moved back and the cgroup removed at the end. That hierarchy is this
// machine's (cgroup v2 has one), where tests running beside this one start rank wrappers
// (RemoteCommand's) that make dtrain-rank-<pid>.<start time> cgroups of their own: below the
// node's own cgroup, its ranks' are told apart from theirs.
class SshdCgroups {
 public:
  SshdCgroups(const SshTestCluster& cluster, int nodes) : cluster_(cluster), nodes_(nodes) {}
  ~SshdCgroups() {
    for (int i = 0; i < nodes_; ++i) {
      // The sshd processes of connections that just closed may take a moment to leave it.
      cluster_.OnNode(i, "echo " + SshdPid(i) +
                             " >/sys/fs/cgroup/cgroup.procs; for t in $(seq 50); "
                             "do rmdir " +
                             Path(i) + "/dtrain-rank-* " + Path(i) + " 2>/dev/null; [ -d " +
                             Path(i) + " ] || break; sleep 0.1; done");
    }
  }
  // "" once node i's sshd is in its cgroup, else what went wrong.
  std::string Enter(int i) const {
    return cluster_.OnNode(
        i, "mkdir -p " + Path(i) + " && echo " + SshdPid(i) + " >" + Path(i) + "/cgroup.procs");
  }
  // The cgroup as the node sees it (in /proc/PID/cgroup) and where it is mounted there.
  std::string Name(int i) const {
    return "/dtrain-test-" + cluster_.dir().substr(cluster_.dir().rfind('/') + 1) + "-node" +
           std::to_string(i);
  }
  std::string Path(int i) const { return "/sys/fs/cgroup" + Name(i); }
  std::string SshdPid(int i) const {
    const std::string pid = ReadText(cluster_.dir() + "/node" + std::to_string(i) + "/sshd.pid");
    return pid.substr(0, pid.find('\n'));
  }

 private:
  const SshTestCluster& cluster_;
  int nodes_;
};

// On nodes with cgroup v2 mounted (as on a systemd machine), each rank runs in a cgroup of its
// own, so a daemon that left the rank's session and replaced its environment (setsid env -i, as
// Python's Popen(env=..., start_new_session=True) does) is still the rank's: it ends with the
// rank, whether another rank failed or the rank itself ended well, and the cgroup goes with it.
TEST(SshLaunch, ADaemonWithAnEnvironmentOfItsOwnEndsWithTheRankWhereNodesHaveCgroups) {
  SshTestCluster cluster("dl-cgroup", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const SshdCgroups sshd(cluster, 2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(cluster.OnNode(i, "mount -t cgroup2 none /sys/fs/cgroup"), "") << "node" << i;
    ASSERT_EQ(sshd.Enter(i), "") << "node" << i;
  }
  // The empty cgroup of a wrapper killed outright (its pid and start time no longer match a
  // process) goes when the next rank starts there; that of a live process stays.
  auto line = [](std::string s) { return s.substr(0, s.find('\n')); };
  const std::string gone = line(cluster.OnNode(0, "sh -c 'echo $$'"));
  const std::string stale = sshd.Path(0) + "/dtrain-rank-" + gone + ".4242";
  const std::string live =
      line(cluster.OnNode(0, "cut -d' ' -f1,22 /proc/" + sshd.SshdPid(0) + "/stat | tr ' ' ."));
  ASSERT_EQ(cluster.OnNode(0, "mkdir " + stale + " " + sshd.Path(0) + "/dtrain-rank-" + live), "");
  const std::string logs = cluster.dir() + "/logs";
  const LaunchResult failed = LaunchLeavingThenFailing(cluster, "setsid env -i sleep 306 &");
  EXPECT_EQ(failed.status, 3) << failed.output;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");

  const LaunchResult ended = Launch("-c " + cluster.cluster_file() + " --log-dir " + logs +
                                    " --job ended -q -- sh -c 'setsid env -i sleep 307 &'");
  EXPECT_EQ(ended.status, 0) << ended.output;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");
  // Where the rank runs, and with DTRAIN_RANK_CGROUP=0 in the cluster file's env, the login's.
  const LaunchResult placed = Launch("-c " + cluster.cluster_file() + " --log-dir " + logs +
                                     " --job placed -q -- grep ^0:: /proc/self/cgroup");
  EXPECT_EQ(placed.status, 0) << placed.output;
  EXPECT_NE(ReadText(logs + "/placed/rank-0.log").find("0::" + sshd.Name(0) + "/dtrain-rank-"),
            std::string::npos)
      << ReadText(logs + "/placed/rank-0.log");
  ASSERT_EQ(ReadText(cluster.cluster_file()).find("env:"), std::string::npos);
  const std::string off = ClusterFileWith(cluster, "env: {DTRAIN_RANK_CGROUP: '0'}\n");
  const LaunchResult shared =
      Launch("-c " + off + " --log-dir " + logs + " --job off -q -- grep ^0:: /proc/self/cgroup");
  EXPECT_EQ(shared.status, 0) << shared.output;
  EXPECT_EQ(ReadText(logs + "/off/rank-0.log"), "0::" + sshd.Name(0) + "\n");
  // A node's rank cgroups are named <wrapper pid>.<start time>.
  EXPECT_EQ(cluster.OnNode(0, "find " + sshd.Path(0) + " -name 'dtrain-rank-*.*'"),
            sshd.Path(0) + "/dtrain-rank-" + live + "\n")
      << "the stale cgroup is removed, the live one kept, the ranks' own removed";
  EXPECT_EQ(cluster.OnNode(1, "find " + sshd.Path(1) + " -name 'dtrain-rank-*.*'"), "")
      << "node1: a rank's cgroup was left behind";
}

// Once dtrain is gone (its connection dropped), a node waits --grace-period between SIGTERM and
// SIGKILL, as dtrain itself would.
TEST(SshLaunch, ADroppedConnectionKillsAfterTheGracePeriod) {
  SshTestCluster cluster("dl-grace", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  testing::DtrainProcess dtrain(
      {"launch", "-q", "-c", cluster.cluster_file(), "--log-dir", logs, "--grace-period", "1", "--",
       "sh", "-c", "trap '' TERM; sleep 300"},
      cluster.dir());
  ASSERT_TRUE(cluster.WaitForCommandOnNodes(1, "sleep 300", 10)) << "the job never started";
  dtrain.Signal(SIGKILL);
  dtrain.Wait();
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(cluster.LeftoverProcesses(1, 10), "");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_GT(seconds, 0.8) << "SIGTERM is ignored: only SIGKILL after the grace period ends it";
  EXPECT_LT(seconds, 3.5) << "--grace-period 1, not a fixed 5 s";
}

}  // namespace
}  // namespace dtrain
