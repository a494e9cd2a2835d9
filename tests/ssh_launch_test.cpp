// `dtrain launch` over ssh on namespace nodes: rank logs on the launching machine, the rank
// environment on every node, tear-down across nodes, and no leftovers when dtrain is killed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <fstream>

#include "tests/ssh_cluster.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

// The cluster file plus `extra` YAML lines, written beside it.
std::string ClusterFileWith(const SshTestCluster& cluster, const std::string& extra) {
  const std::string path = cluster.dir() + "/cluster-test.yaml";
  std::ofstream(path) << ReadText(cluster.cluster_file()) << extra;
  return path;
}

struct LaunchResult {
  std::string output;
  int status = -1;
  double seconds = 0;
};

LaunchResult Launch(const std::string& args) {
  const auto start = Clock::now();
  LaunchResult r;
  r.output = RunOutput(kDtrain + " launch " + args + " 2>&1; echo \"status=$?\"");
  const size_t at = r.output.rfind("status=");
  if (at != std::string::npos) r.status = std::stoi(r.output.substr(at + 7));
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

TEST(SshLaunch, RankLogsShowEachNodesHostnameAndEnvironment) {
  SshTestCluster cluster("dl-env", 3, 2);
  REQUIRE_CLUSTER(cluster);
  const std::string canary = cluster.dir() + "/pwned";
  const std::string file = ClusterFileWith(cluster, "workdir: /tmp\nenv: {TRICKY: \"it's $(touch " +
                                                        canary + "); `touch " + canary + "`\"}\n");
  const std::string logs = cluster.dir() + "/logs";
  const LaunchResult r =
      Launch("-c " + file + " --log-dir " + logs + " --job env -q -- sh -c " +
             "'echo host=$(hostname) rank=$RANK/$WORLD_SIZE node=$NODE_RANK local=$LOCAL_RANK "
             "master=$MASTER_ADDR:$MASTER_PORT pp=$PYTHONPATH cwd=$(pwd); echo \"t=$TRICKY\" >&2'");
  ASSERT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < 6; ++rank) {
    const std::string log = ReadText(logs + "/env/rank-" + std::to_string(rank) + ".log");
    const std::string node = std::to_string(rank / 2);
    EXPECT_EQ(log, "host=node" + node + " rank=" + std::to_string(rank) + "/6 node=" + node +
                       " local=" + std::to_string(rank % 2) +
                       " master=10.231.0.10:29500 pp=/tmp cwd=/tmp\n"
                       "t=it's $(touch " +
                       canary + "); `touch " + canary + "`\n");
  }
  EXPECT_NE(access(canary.c_str(), F_OK), 0) << "an environment value was executed";
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
  const pid_t dtrain = fork();
  if (dtrain == 0) {
    const std::string cluster_file = cluster.cluster_file();
    execl(kDtrain.c_str(), "dtrain", "launch", "-q", "-c", cluster_file.c_str(), "--log-dir",
          logs.c_str(), "--", "sleep", "300", nullptr);
    _exit(127);
  }
  ASSERT_TRUE(cluster.WaitForCommandOnNodes(3, "sleep 300", 10)) << "the job never started";
  kill(dtrain, SIGKILL);
  waitpid(dtrain, nullptr, 0);
  EXPECT_EQ(cluster.LeftoverProcesses(3, 3), "");
}

// Once dtrain is gone (its connection dropped), a node waits --grace-period between SIGTERM and
// SIGKILL, as dtrain itself would.
TEST(SshLaunch, ADroppedConnectionKillsAfterTheGracePeriod) {
  SshTestCluster cluster("dl-grace", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  const pid_t dtrain = fork();
  if (dtrain == 0) {
    const std::string cluster_file = cluster.cluster_file();
    execl(kDtrain.c_str(), "dtrain", "launch", "-q", "-c", cluster_file.c_str(), "--log-dir",
          logs.c_str(), "--grace-period", "1", "--", "sh", "-c", "trap '' TERM; sleep 300",
          nullptr);
    _exit(127);
  }
  ASSERT_TRUE(cluster.WaitForCommandOnNodes(1, "sleep 300", 10)) << "the job never started";
  kill(dtrain, SIGKILL);
  waitpid(dtrain, nullptr, 0);
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(cluster.LeftoverProcesses(1, 10), "");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_GT(seconds, 0.8) << "SIGTERM is ignored: only SIGKILL after the grace period ends it";
  EXPECT_LT(seconds, 3.5) << "--grace-period 1, not a fixed 5 s";
}

TEST(SshLaunch, AnUnreachableNodeIsNamedWithinTheConnectTimeout) {
  SshTestCluster cluster("dl-ghost", 1, 1);
  REQUIRE_CLUSTER(cluster);
  std::string text = ReadText(cluster.cluster_file());
  text.replace(text.find("connect_timeout: 5"), 18, "connect_timeout: 2");
  text += "  - {host: ghost, address: 10.231.0.250}\n";
  const std::string file = cluster.dir() + "/cluster-ghost.yaml";
  std::ofstream(file) << text;
  const LaunchResult r = Launch("-c " + file + " --log-dir " + cluster.dir() + "/logs -- true");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("node ghost (10.231.0.250): ssh: cannot connect"), std::string::npos)
      << r.output;
  EXPECT_LT(r.seconds, 5) << r.output;
}

TEST(SshLaunch, CtrlCWhileANodeIsStillConnectingStopsAtOnce) {
  SshTestCluster cluster("dl-int", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = cluster.dir() + "/cluster-ghost.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file())
                      << "  - {host: ghost, address: 10.231.0.250}\n";  // 5 s to time out
  const std::string logs = cluster.dir() + "/logs";
  const pid_t dtrain = fork();
  if (dtrain == 0) {
    execl(kDtrain.c_str(), "dtrain", "launch", "-q", "-c", file.c_str(), "--log-dir", logs.c_str(),
          "--", "sleep", "300", nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const auto start = Clock::now();
  kill(dtrain, SIGINT);
  int status = 0;
  waitpid(dtrain, &status, 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.5);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGINT) << status;
  EXPECT_EQ(cluster.LeftoverProcesses(1, 3), "");
}

}  // namespace
}  // namespace dtrain
