// Real-cluster SSH on namespace nodes (tests/cluster) that look like real clusters: nodes named only by
// ~/.ssh/config Host aliases, nodes reachable only through a bastion (ProxyJump), and private
// storage at /srv/node on every node (nothing shared with the launching machine there). `dtrain
// sync` into that storage: ssh_sync_real_cluster_test.cpp.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/shell_run.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

using testing::ShellOutput;
using testing::ShellStdout;

// HOME for one test, with an ssh config naming every node by alias only: the cluster's key and
// known_hosts live in the cluster folder, reachable only through this config. `extra` is
// appended inside each node's Host block.
class TestHome {
 public:
  TestHome(const SshTestCluster& cluster, int nodes, const std::string& extra = "")
      : home_(cluster.dir() + "/home") {
    fs::create_directories(home_ + "/.ssh");
    std::ofstream config(home_ + "/.ssh/config");
    for (int i = 0; i < nodes; ++i) {
      config << "Host node" << i << "\n  HostName " << cluster.Field(i, 1) << "\n" << extra;
    }
    config << "Host node*\n  User root\n  IdentityFile " << cluster.dir() << "/id_ed25519\n"
           << "  IdentitiesOnly yes\n  UserKnownHostsFile " << cluster.dir() << "/known_hosts\n"
           << "  StrictHostKeyChecking yes\n  ConnectTimeout 3\n";
    const char* old = std::getenv("HOME");
    old_home_ = old ? old : "";
    ::setenv("HOME", home_.c_str(), 1);
    ::unsetenv("SSH_AUTH_SOCK");
  }
  ~TestHome() { ::setenv("HOME", old_home_.c_str(), 1); }
  const std::string& dir() const { return home_; }

 private:
  std::string home_;
  std::string old_home_;
};

// A cluster file with only `host:` names and what the test adds.
std::string AliasClusterFile(const SshTestCluster& cluster, const std::vector<int>& nodes,
                             const std::string& extra = "") {
  const std::string path = cluster.dir() + "/alias.yaml";
  std::ofstream out(path);
  out << "transport: ssh\n" << extra << "nodes:\n";
  for (int i : nodes) out << "  - host: node" << i << "\n";
  return path;
}

// Every node answers under its own name, with MASTER_ADDR its HostName (not the alias), and
// the doctor reaches all of them; with the config switched off nothing connects, naming node0.
TEST(RealClusterSsh, HostNamesOnlyResolvedThroughSshConfig) {
  SshTestCluster cluster("rc-config", 2, 1);
  REQUIRE_CLUSTER(cluster);
  TestHome home(cluster, 2);
  const std::string file = AliasClusterFile(cluster, {0, 1});
  const std::string logs = cluster.dir() + "/logs";
  const ShellOutput r = ShellStdout(kDtrain + " launch -c " + file + " --log-dir " + logs +
                                    " --job cfg -q sh -c 'echo $(hostname) $MASTER_ADDR' 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(ReadText(logs + "/cfg/rank-0.log"), "node0 10.231.0.10\n");
  EXPECT_EQ(ReadText(logs + "/cfg/rank-1.log"), "node1 10.231.0.10\n");

  const ShellOutput doctor =
      ShellStdout(kDtrain + " doctor --json --timeout 20 -c " + file + " 2>/dev/null");
  const nlohmann::json doc = nlohmann::json::parse(doctor.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << doctor.out;
  ASSERT_EQ(doc["nodes"].size(), 2u) << doctor.out;
  for (const auto& node : doc["nodes"]) {
    EXPECT_THAT(node.dump(), HasSubstr("\"hostname\":\"" + node["host"].get<std::string>() + "\""))
        << node.dump();
  }

  const std::string without = AliasClusterFile(cluster, {0, 1}, "ssh: {config: none, connect_timeout: 2}\n");
  const ShellOutput refused = ShellStdout(kDtrain + " launch -c " + without + " --log-dir " + logs +
                                          " --job nocfg -q true 2>&1");
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("node node0")) << refused.out;
}

// Nodes 1 and 2 answer only node0. Through ProxyJump node0 (in the config), launch, doctor and
// timeline fetch reach them over one connection to the bastion; a bastion whose host key
// changed is refused, naming the bastion.
TEST(RealClusterSsh, NodesBehindABastion) {
  SshTestCluster cluster("rc-bastion", 3, 1);
  REQUIRE_CLUSTER(cluster);
  cluster.Hide({1, 2});
  TestHome home(cluster, 3);
  {
    std::ofstream config(home.dir() + "/.ssh/config", std::ios::app);
    config << "Host node1 node2\n  ProxyJump node0\n";
  }
  // Hidden for real: without the bastion, node1 cannot be reached.
  const std::string direct = AliasClusterFile(cluster, {1}, "ssh: {proxy_jump: none, connect_timeout: 2}\n");
  const std::string logs = "/srv/node/rc-bastion-logs";  // private on every node
  fs::remove_all(logs);
  const ShellOutput hidden = ShellStdout(kDtrain + " launch -c " + direct + " --log-dir " + logs +
                                         " --job direct -q true 2>&1");
  EXPECT_NE(hidden.status, 0) << hidden.out;
  EXPECT_THAT(hidden.out, HasSubstr("node node1")) << hidden.out;

  const std::string file = AliasClusterFile(cluster, {1, 2});
  // Counted once both ranks printed (both tunnels up) and while they still sleep.
  const ShellOutput r = ShellStdout(
      kDtrain + " launch -c " + file + " --log-dir " + logs +
      " --job jump -q sh -c 'hostname; sleep 4' & for i in $(seq 100); do " + "[ -s " + logs +
      "/jump/rank-0.log ] && [ -s " + logs +
      "/jump/rank-1.log ] && break; sleep 0.05; done; ip netns exec " + cluster.Field(0, 2) +
      " ss -Htn state established '( sport = :22 )' | wc -l; wait");
  EXPECT_EQ(r.out, "1\n") << "one connection to the bastion for both nodes";
  EXPECT_EQ(ReadText(logs + "/jump/rank-0.log"), "node1\n") << r.out;
  EXPECT_EQ(ReadText(logs + "/jump/rank-1.log"), "node2\n") << r.out;

  const ShellOutput doctor =
      ShellStdout(kDtrain + " doctor --json --timeout 20 -c " + file + " 2>/dev/null");
  const nlohmann::json doc = nlohmann::json::parse(doctor.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << doctor.out;
  for (const auto& node : doc["nodes"]) {
    EXPECT_THAT(node.dump(), HasSubstr("\"hostname\":\"" + node["host"].get<std::string>() + "\""))
        << node.dump();
  }

  // A trace written on each hidden node's private disk comes back through the bastion.
  const ShellOutput traced =
      ShellStdout(kDtrain + " launch -c " + file + " --log-dir " + logs +
                  " --job tl --timeline -q sh -c 'mkdir -p \"$(dirname "
                  "\"$DTRAIN_TIMELINE\")\" && echo \"[]\" >\"$DTRAIN_TIMELINE\"' 2>&1");
  ASSERT_EQ(traced.status, 0) << traced.out;
  ASSERT_FALSE(fs::exists(logs + "/tl/timeline/rank-0.json"));
  ShellStdout(kDtrain + " timeline --log-dir " + logs + " --job tl 2>&1");
  EXPECT_EQ(ReadText(logs + "/tl/timeline/rank-0.json"), "[]\n");
  EXPECT_EQ(ReadText(logs + "/tl/timeline/rank-1.json"), "[]\n");

  // node0's known_hosts line now carries node1's key: the bastion is an impostor.
  const std::string node1_key = RunOutput("grep '^10.231.0.11 ' " + cluster.dir() +
                                          "/known_hosts | cut -d' ' -f2-");
  std::ofstream(home.dir() + "/wrong_known_hosts")
      << "10.231.0.10 " << node1_key << RunOutput("grep -v '^10.231.0.10 ' " + cluster.dir() + "/known_hosts");
  const std::string wrong = AliasClusterFile(
      cluster, {1, 2}, "ssh: {known_hosts: " + home.dir() + "/wrong_known_hosts}\n");
  const ShellOutput refused = ShellStdout(kDtrain + " launch -c " + wrong + " --log-dir " + logs +
                                          " --job wrong -q true 2>&1");
  EXPECT_NE(refused.status, 0) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("bastion node0 (10.231.0.10)")) << refused.out;
  EXPECT_THAT(refused.out, HasSubstr("CHANGED")) << refused.out;
  fs::remove_all(logs);
}

// Ranks on nodes with private storage write metrics under $DTRAIN_LOG_DIR there; when the job
// ends every rank's file is in the job folder here.
TEST(RealClusterSsh, MetricsOfEveryRankComeBack) {
  SshTestCluster cluster("rc-metrics", 3, 2);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = "/srv/node/rc-metrics-logs";
  fs::remove_all(logs);
  const ShellOutput r = ShellStdout(
      kDtrain + " launch -c " + cluster.cluster_file() + " --log-dir " + logs +
      " --job m -q sh -c 'mkdir -p \"$DTRAIN_LOG_DIR/metrics\" && printf \"{\\\"step\\\":1,"
      "\\\"rank\\\":%s,\\\"host\\\":\\\"%s\\\"}\\n\" \"$RANK\" \"$(hostname)\" "
      ">\"$DTRAIN_LOG_DIR/metrics/rank-$RANK.jsonl\"' 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("metrics of 6 rank(s) fetched")) << r.out;
  for (int rank = 0; rank < 6; ++rank) {
    EXPECT_EQ(ReadText(logs + "/m/metrics/rank-" + std::to_string(rank) + ".jsonl"),
              "{\"step\":1,\"rank\":" + std::to_string(rank) + ",\"host\":\"node" +
                  std::to_string(rank / 2) + "\"}\n");
  }
  fs::remove_all(logs);
}

}  // namespace
}  // namespace dtrain
