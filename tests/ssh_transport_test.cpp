// The ssh transport against real sshd nodes in network namespaces: launch, environment,
// tear-down, connection loss, unreachable nodes, authentication and host-key policies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>

#include "launcher/transport.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/transport_recorder.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

using Recorder = testing::TransportRecorder;

ProcessSpec Shell(int id, int node, const std::string& script) {
  ProcessSpec p;
  p.id = id;
  p.node_index = node;
  p.argv = {"sh", "-c", script};
  return p;
}

TEST(SshTransport, ThreeNodesTwoSlotsRunOnTheirNodesWithTheirEnvironment) {
  SshTestCluster cluster("launch", 3, 2);
  REQUIRE_CLUSTER(cluster);
  ClusterSpec spec = cluster.Spec();
  spec.workdir = "/tmp";
  auto transport = MakeTransport(spec);
  std::vector<ProcessSpec> procs;
  for (int rank = 0; rank < 6; ++rank) {
    ProcessSpec p = Shell(rank, rank / 2,
                          "echo host=$(hostname) rank=$RANK pwd=$(pwd) pp=$PYTHONPATH; "
                          "echo to-stderr >&2; echo after");
    p.env = {{"RANK", std::to_string(rank)}, {"PYTHONPATH", "/node/existing"}};
    p.python_path_head = "/shared/project";
    procs.push_back(p);
  }
  Recorder rec;
  transport->Start(procs, rec);
  ASSERT_TRUE(rec.RunToEnd(*transport, 20));
  for (int rank = 0; rank < 6; ++rank) {
    SCOPED_TRACE(rank);
    EXPECT_TRUE(rec.exits[rank].ok()) << rec.exits[rank].Describe();
    // stdout and stderr arrive on the channel's two streams: each in order, stderr apart.
    const std::string out = "host=node" + std::to_string(rank / 2) +
                            " rank=" + std::to_string(rank) +
                            " pwd=/tmp pp=/shared/project:/node/existing\n";
    EXPECT_EQ(rec.errors[rank], "to-stderr\n");
    EXPECT_THAT(rec.output[rank],
                ::testing::AnyOf(out + "to-stderr\nafter\n", out + "after\nto-stderr\n"));
  }
}

TEST(SshTransport, ValuesReachTheProcessByteForByteAndExecuteNothing) {
  SshTestCluster cluster("inject", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string canary = cluster.dir() + "/pwned";
  std::remove(canary.c_str());
  const std::vector<std::string> values = {"two words",
                                           "it's \"quoted\"",
                                           "$(touch " + canary + ")",
                                           "`touch " + canary + "`",
                                           "a;touch " + canary,
                                           "line1\nline2\n",
                                           "$HOME ${PATH} \\ * ? ~ & | < > !",
                                           "'",
                                           ""};
  auto transport = MakeTransport(cluster.Spec());
  std::vector<ProcessSpec> procs;
  for (size_t i = 0; i < values.size(); ++i) {
    // The value arrives as env V, as an argument, and as stdin; each is echoed back.
    ProcessSpec p = Shell(static_cast<int>(i), 0, "printf '%s|%s|' \"$V\" \"$1\"; cat");
    p.argv.push_back("arg0");
    p.argv.push_back(values[i]);
    p.env = {{"V", values[i]}};
    p.stdin_data = values[i];
    procs.push_back(p);
  }
  Recorder rec;
  transport->Start(procs, rec);
  ASSERT_TRUE(rec.RunToEnd(*transport, 20));
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_TRUE(rec.exits[i].ok()) << rec.exits[i].Describe();
    EXPECT_EQ(rec.output[i], values[i] + "|" + values[i] + "|" + values[i]);
  }
  EXPECT_NE(access(canary.c_str(), F_OK), 0) << "a value was executed";
}

TEST(SshTransport, FailureOnNodeTwoBringsDownEveryNodeAndLeavesNothing) {
  SshTestCluster cluster("failure", 3, 2);
  REQUIRE_CLUSTER(cluster);
  auto transport = MakeTransport(cluster.Spec());
  std::vector<ProcessSpec> procs;
  for (int rank = 0; rank < 6; ++rank) {
    // Children of the rank (sleep) must go too: the whole process group is signalled.
    procs.push_back(Shell(rank, rank / 2, rank == 5 ? "sleep 1; exit 3" : "sleep 300 & wait"));
  }
  Recorder rec;
  rec.stop_on_failure = transport.get();
  transport->Start(procs, rec);
  ASSERT_TRUE(rec.RunToEnd(*transport, 15));
  EXPECT_EQ(rec.exits[5].code, 3);
  for (int rank = 0; rank < 5; ++rank) {
    EXPECT_EQ(rec.exits[rank].signal, SIGTERM) << rank << ": " << rec.exits[rank].Describe();
    EXPECT_LT(rec.exit_after_s[rank], 5.0);
  }
  EXPECT_EQ(cluster.LeftoverProcesses(3, 3), "");
}

TEST(SshTransport, UnreachableNodeFailsWithinTheConnectTimeoutAndDelaysNoOther) {
  SshTestCluster cluster("unreachable", 2, 1);
  REQUIRE_CLUSTER(cluster);
  ClusterSpec spec = cluster.Spec();
  spec.ssh.connect_timeout_s = 3;
  NodeSpec ghost;
  ghost.host = "ghost";
  ghost.address = "10.231.0.250";  // on the bridge's subnet, but nobody has it
  spec.nodes.insert(spec.nodes.begin(), ghost);
  auto transport = MakeTransport(spec);
  Recorder rec;
  transport->Start({Shell(0, 0, "true"), Shell(1, 1, "echo one"), Shell(2, 2, "echo two")}, rec);
  ASSERT_TRUE(rec.RunToEnd(*transport, 10));
  EXPECT_NE(rec.exits[0].error.find("node ghost (10.231.0.250): ssh: cannot connect"),
            std::string::npos)
      << rec.exits[0].error;
  EXPECT_GT(rec.exit_after_s[0], 2.9);
  EXPECT_LT(rec.exit_after_s[0], 4.5);
  EXPECT_TRUE(rec.exits[1].ok() && rec.exits[2].ok());
  // The live nodes finished while the dead one was still being waited for.
  EXPECT_LT(rec.exit_after_s[1], rec.exit_after_s[0]) << "the dead node held up a live one";
  EXPECT_LT(rec.exit_after_s[2], rec.exit_after_s[0]) << "the dead node held up a live one";
}

// Runs `true` on node 0 with `spec` and returns its exit status.
ExitStatus RunTrue(const ClusterSpec& spec) {
  auto transport = MakeTransport(spec);
  Recorder rec;
  transport->Start({Shell(0, 0, "true")}, rec);
  EXPECT_TRUE(rec.RunToEnd(*transport, 15));
  return rec.exits[0];
}

TEST(SshTransport, WrongKeyIsRefusedWithoutAPrompt) {
  SshTestCluster cluster("wrongkey", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string key = cluster.dir() + "/stranger";
  RunOutput("rm -f " + key + "*; ssh-keygen -q -t ed25519 -N '' -f " + key);
  ClusterSpec spec = cluster.Spec();
  spec.ssh.identity_file = key;
  const std::string home = getenv("HOME") ? getenv("HOME") : "/root";
  const char* agent = getenv("SSH_AUTH_SOCK");
  const std::string agent_socket = agent ? agent : "";
  setenv("HOME", cluster.dir().c_str(), 1);  // no default keys
  unsetenv("SSH_AUTH_SOCK");
  const ExitStatus status = RunTrue(spec);
  setenv("HOME", home.c_str(), 1);
  if (!agent_socket.empty()) setenv("SSH_AUTH_SOCK", agent_socket.c_str(), 1);
  EXPECT_NE(status.error.find("node node0 (10.231.0.10): ssh: authentication failed"),
            std::string::npos)
      << status.error;
  EXPECT_NE(status.error.find(key + " (rejected)"), std::string::npos) << status.error;
}

TEST(SshTransport, ChangedHostKeyIsRefusedNamingTheFingerprint) {
  SshTestCluster cluster("changedkey", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string other = cluster.dir() + "/other_host_key";
  RunOutput("rm -f " + other + "*; ssh-keygen -q -t ed25519 -N '' -f " + other);
  const std::string known = cluster.dir() + "/known_hosts_changed";
  RunOutput("echo \"10.231.0.10 $(cut -d' ' -f1,2 " + other + ".pub)\" > " + known);
  ClusterSpec spec = cluster.Spec();
  spec.ssh.known_hosts = known;
  for (HostKeyPolicy policy : {HostKeyPolicy::kStrict, HostKeyPolicy::kAcceptNew}) {
    spec.ssh.host_key_policy = policy;
    const ExitStatus status = RunTrue(spec);
    EXPECT_NE(status.error.find("node node0 (10.231.0.10): ssh: host key for 10.231.0.10 has "
                                "CHANGED"),
              std::string::npos)
        << status.error;
    const std::string real = RunOutput("ssh-keygen -lf " + cluster.dir() +
                                       "/node0/ssh_host_ed25519_key.pub | cut -d' ' -f2");
    EXPECT_NE(status.error.find(real.substr(0, real.size() - 1)), std::string::npos)
        << status.error << " lacks " << real;
    const std::string expected = RunOutput("ssh-keygen -lf " + other + ".pub | cut -d' ' -f2");
    EXPECT_NE(status.error.find("(expected ssh-ed25519 " + expected.substr(0, expected.size() - 1)),
              std::string::npos)
        << status.error << " lacks the recorded " << expected;
  }
}

TEST(SshTransport, StrictRefusesUnknownHostsAndAcceptNewRecordsThem) {
  SshTestCluster cluster("unknownkey", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string known = cluster.dir() + "/known_hosts_empty";
  RunOutput(": > " + known);
  ClusterSpec spec = cluster.Spec();
  spec.ssh.known_hosts = known;
  const ExitStatus strict = RunTrue(spec);
  EXPECT_NE(strict.error.find("node node0 (10.231.0.10): ssh: host key for 10.231.0.10 is not in"),
            std::string::npos)
      << strict.error;
  EXPECT_NE(strict.error.find("SHA256:"), std::string::npos) << strict.error;
  EXPECT_EQ(ReadText(known), "");

  spec.ssh.host_key_policy = HostKeyPolicy::kAcceptNew;
  auto transport = MakeTransport(spec);
  Recorder rec;
  transport->Start({Shell(0, 0, "true"), Shell(1, 1, "true")}, rec);
  ASSERT_TRUE(rec.RunToEnd(*transport, 15));
  EXPECT_TRUE(rec.exits[0].ok()) << rec.exits[0].Describe();
  EXPECT_TRUE(rec.exits[1].ok()) << rec.exits[1].Describe();
  const std::string recorded = ReadText(known);
  EXPECT_NE(recorded.find("10.231.0.10 ssh-ed25519 "), std::string::npos) << recorded;
  EXPECT_NE(recorded.find("10.231.0.11 ssh-ed25519 "), std::string::npos) << recorded;
  // Now known: strict accepts them.
  spec.ssh.host_key_policy = HostKeyPolicy::kStrict;
  EXPECT_TRUE(RunTrue(spec).ok());
}

TEST(SshTransport, HashedKnownHostsEntriesAreRecognised) {
  SshTestCluster cluster("hashedkh", 1, 1);
  REQUIRE_CLUSTER(cluster);
  // Debian's ssh client hashes known_hosts (HashKnownHosts yes): such files must work as they are.
  const std::string known = cluster.dir() + "/known_hosts_hashed";
  RunOutput("cp " + cluster.dir() + "/known_hosts " + known + " && ssh-keygen -q -H -f " + known +
            " >/dev/null 2>&1");
  ASSERT_EQ(ReadText(known).rfind("|1|", 0), 0u) << ReadText(known);
  ClusterSpec spec = cluster.Spec();
  spec.ssh.known_hosts = known;
  const ExitStatus status = RunTrue(spec);
  EXPECT_TRUE(status.ok()) << status.Describe();
}

TEST(SshTransport, LostConnectionKillsTheRemoteProcesses) {
  SshTestCluster cluster("drop", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const ClusterSpec spec = cluster.Spec();
  // The launching process dies without any chance to clean up.
  const pid_t launcher = fork();
  if (launcher == 0) {
    auto transport = MakeTransport(spec);
    Recorder rec;
    transport->Start({Shell(0, 0, "sleep 300 & wait"), Shell(1, 1, "sleep 300 & wait")}, rec);
    rec.RunToEnd(*transport, 60);
    _exit(0);
  }
  ASSERT_TRUE(cluster.WaitForCommandOnNodes(2, "sleep 300", 10)) << "the job never started";
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");
}

TEST(SshTransport, KilledSshdSessionReportsTheNodeAndKillsItsProcesses) {
  SshTestCluster cluster("sshdkill", 1, 1);
  REQUIRE_CLUSTER(cluster);
  auto transport = MakeTransport(cluster.Spec());
  Recorder rec;
  transport->Start({Shell(0, 0, "echo started; sleep 300 & wait")}, rec);
  while (rec.output[0].empty() && Clock::now() - rec.start < std::chrono::seconds(10)) {
    transport->Poll(100, rec);
  }
  ASSERT_EQ(rec.output[0], "started\n");
  // The per-connection sshd processes (not the listener) die: the connection drops.
  for (const std::string& p : cluster.NodeProcesses(0)) {
    if (p.find("sshd") != std::string::npos) kill(std::stoi(p), SIGKILL);
  }
  ASSERT_TRUE(rec.RunToEnd(*transport, 15));
  EXPECT_NE(rec.exits[0].error.find("node node0 (10.231.0.10): ssh: connection lost"),
            std::string::npos)
      << rec.exits[0].Describe();
  EXPECT_EQ(cluster.LeftoverProcesses(1, 3), "");
}

}  // namespace
}  // namespace dtrain
