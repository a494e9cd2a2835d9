// `dtrain launch` over ssh on namespace nodes: rank logs on the launching machine, the rank
// environment on every node, every node checked before a rank starts anywhere, an unreachable
// node named, Ctrl-C while nodes connect or sync, and two logins per node per launch.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/support/dtrain_process.h"
#include "tests/support/interrupted_start.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/ssh_launch_run.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using test::ClusterFileWith;
using test::Launch;
using test::LaunchResult;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

// A TCP forwarder from `listen_address`:22 to `target`:22 that holds each connection for
// `delay_ms` before it forwards anything: a node that is slow to reach, so that the other
// nodes are through long before it answers. One connection at a time, in a thread.
class SlowForwarder {
 public:
  SlowForwarder(const std::string& listen_address, const std::string& target, int delay_ms)
      : target_(target), delay_ms_(delay_ms) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int on = 1;
    setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in addr = Address(listen_address);
    ok_ = bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          listen(listener_, 16) == 0;
    if (ok_) thread_ = std::thread([this] { Serve(); });
  }
  ~SlowForwarder() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    close(listener_);
  }
  bool ok() const { return ok_; }

 private:
  static sockaddr_in Address(const std::string& ip) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(22);
    inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
    return addr;
  }
  void Serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
      const int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr = Address(target_);
      if (connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        Relay(client, server);
      }
      close(server);
      close(client);
    }
  }
  void Relay(int a, int b) {
    char buffer[16384];
    while (!stop_) {
      pollfd fds[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (poll(fds, 2, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!fds[i].revents) continue;
        const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
        if (n <= 0 || write(fds[1 - i].fd, buffer, n) != n) return;
      }
    }
  }

  std::string target_;
  int delay_ms_;
  int listener_ = -1;
  bool ok_ = false;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Every node is checked before the first rank starts anywhere: a node whose host key changed
// stops the launch with both fingerprints and the fix, and no rank ran on any node, though the
// changed node answers last (2 s late) and the others were ready long before.
TEST(SshLaunch, ChangedHostKeyOnOneNodeStartsNoRankAnywhere) {
  SshTestCluster cluster("dl-hostkey", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string node1 = cluster.dir() + "/node1";
  const std::string old_fp =
      RunOutput("ssh-keygen -lf " + node1 + "/ssh_host_ed25519_key.pub | cut -d' ' -f2");
  // node1 is reached at 127.0.0.2 through the slow forwarder; known_hosts has its old key there.
  RunOutput("echo \"127.0.0.2 $(cut -d' ' -f1,2 " + node1 + "/ssh_host_ed25519_key.pub)\" >> " +
            cluster.dir() + "/known_hosts");
  SlowForwarder forwarder("127.0.0.2", cluster.Field(1, 1), 2000);
  ASSERT_TRUE(forwarder.ok());
  // node1 is reinstalled: a new host key, which its sshd loads on SIGHUP.
  RunOutput("cd " + node1 + " && rm -f ssh_host_ed25519_key* && ssh-keygen -q -t ed25519 -N '' " +
            "-f ssh_host_ed25519_key && kill -HUP $(cat sshd.pid)");
  const std::string new_fp =
      RunOutput("ssh-keygen -lf " + node1 + "/ssh_host_ed25519_key.pub | cut -d' ' -f2");
  ASSERT_NE(old_fp, new_fp);
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {
    reloaded = RunOutput("ssh-keyscan -t ed25519 " + cluster.Field(1, 1) +
                         " 2>/dev/null | ssh-keygen -lf - 2>/dev/null")
                   .find(new_fp.substr(0, new_fp.size() - 1)) != std::string::npos;
    if (!reloaded) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(reloaded) << "node1's sshd did not take its new host key";
  std::string text = ReadText(cluster.cluster_file());
  text.replace(text.find("address: 10.231.0.11"), 20, "address: 127.0.0.2");
  const std::string file = cluster.dir() + "/cluster-changed.yaml";
  std::ofstream(file) << text;

  const LaunchResult r = Launch("-c " + file + " --log-dir " + cluster.dir() +
                                "/logs -q -- sh -c 'touch /srv/node/marker-$RANK; sleep 5'");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("node node1 (127.0.0.2)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(file), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(old_fp.substr(0, old_fp.size() - 1)), std::string::npos)
      << r.output << " lacks the recorded " << old_fp;
  EXPECT_NE(r.output.find(new_fp.substr(0, new_fp.size() - 1)), std::string::npos)
      << r.output << " lacks the offered " << new_fp;
  EXPECT_NE(r.output.find("ssh-keygen -R"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no rank was started"), std::string::npos) << r.output;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(cluster.OnNode(i, "ls /srv/node"), "") << "a rank ran on node" << i;
  }
  EXPECT_EQ(cluster.LeftoverProcesses(3, 3), "");
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

// A node on the bridge's subnet whose address nobody has: it never answers.
const char* const kGhostNode = "  - {host: ghost, address: 10.231.0.250}\n";

TEST(SshLaunch, AnUnreachableNodeIsNamedWithinTheConnectTimeout) {
  SshTestCluster cluster("dl-ghost", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = cluster.dir() + "/cluster-ghost.yaml";
  std::ofstream(file) << test::WithConnectTimeout(ReadText(cluster.cluster_file()), 2)
                      << kGhostNode;
  // Short of nodes, the job waits for it (join_timeout) before any rank starts.
  const LaunchResult r = Launch("-c " + file + " --log-dir " + cluster.dir() +
                                "/logs --rdzv-conf join_timeout=1 -- true");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("node ghost (10.231.0.250): ssh: cannot connect"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("is short of nodes (1 healthy node(s) left, the job needs at least 2): "
                          "it waits up to 1 s"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("and no node came back within 1 s (torchrun's join_timeout, "
                          "--rdzv-conf join_timeout=S); no rank was started. Fix or replace the "
                          "node(s), give spares (--spares N), let the job run on fewer nodes "
                          "(--nnodes MIN:MAX) or wait longer for them (--rdzv-conf "
                          "join_timeout=S)"),
            std::string::npos)
      << r.output;
  EXPECT_LT(r.seconds, 5) << r.output;
  // An elastic Horovod job waits as horovodrun's driver waits for --min-np slots.
  const LaunchResult elastic =
      Launch("-c " + file + " --log-dir " + cluster.dir() +
             "/logs -np 2 --min-np 2 --elastic-timeout 1 -- python3 -c pass");
  EXPECT_EQ(elastic.status, 1) << elastic.output;
  EXPECT_NE(elastic.output.find("it waits up to 1 s (horovodrun's --elastic-timeout S)"),
            std::string::npos)
      << elastic.output;
  EXPECT_NE(elastic.output.find("and no node came back within 1 s (horovodrun's --elastic-timeout "
                                "S); no rank was started."),
            std::string::npos)
      << elastic.output;
}

// Ctrl-C while a job short of nodes waits for them at its start, or while one below --nnodes MAX
// waits its last call (--rdzv-conf last_call_timeout): it stops at once, no rank was started, and
// job.json says it was interrupted.
TEST(SshLaunch, CtrlCWhileTheStartWaitsForANodeStopsAtOnce) {
  SshTestCluster cluster("dl-wait-int", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = cluster.dir() + "/cluster-ghost.yaml";
  std::ofstream(file) << test::WithConnectTimeout(ReadText(cluster.cluster_file()), 1)
                      << kGhostNode;
  const std::string logs = cluster.dir() + "/logs";
  testing::DtrainProcess dtrain(
      {"launch", "-q", "-c", file, "--log-dir", logs, "--job", "w", "--", "sleep", "300"},
      cluster.dir());
  ASSERT_TRUE(testing::WaitFor(
      [&] { return dtrain.err().find("dtrain: job w is short of nodes") != std::string::npos; },
      20))
      << dtrain.err();
  const auto start = Clock::now();
  dtrain.Signal(SIGINT);
  ASSERT_GE(dtrain.Wait(), 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.5);
  EXPECT_EQ(dtrain.exit_status().code, 128 + SIGINT) << dtrain.err();
  EXPECT_NE(dtrain.err().find("dtrain: job w cannot start: 1 healthy node(s) left, the job needs "
                              "at least 2, and it was interrupted by SIGINT while it waited for "
                              "nodes; no rank was started"),
            std::string::npos)
      << dtrain.err();
  EXPECT_NE(ReadText(logs + "/w/job.json").find("\"status\": \"interrupted\""), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(logs + "/w/rank-0.log"));
  EXPECT_EQ(cluster.LeftoverProcesses(1, 3), "");

  testing::DtrainProcess last_call(
      {"launch", "-q", "-c", file, "--log-dir", logs, "--job", "l", "--nnodes", "1:2",
       "--rdzv-conf", "last_call_timeout=60", "--", "sleep", "300"},
      cluster.dir());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return last_call.err().find(
                   "dtrain: job l has 1 of its 2 nodes (--nnodes 1:2): before it "
                   "starts, it waits up to 60 s") != std::string::npos;
      },
      20))
      << last_call.err();
  const auto signalled = Clock::now();
  last_call.Signal(SIGINT);
  ASSERT_GE(last_call.Wait(), 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - signalled).count(), 2.5);
  EXPECT_EQ(last_call.exit_status().code, 128 + SIGINT) << last_call.err();
  test::ExpectInterruptedBeforeStart(last_call, logs + "/l", "l", "while it waited for nodes");
  EXPECT_EQ(cluster.LeftoverProcesses(1, 3), "");
}

TEST(SshLaunch, CtrlCWhileANodeIsStillConnectingStopsAtOnce) {
  SshTestCluster cluster("dl-int", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = cluster.dir() + "/cluster-ghost.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file()) << kGhostNode;  // 5 s to time out
  const std::string logs = cluster.dir() + "/logs";
  testing::DtrainProcess dtrain(
      {"launch", "-q", "-c", file, "--log-dir", logs, "--", "sleep", "300"}, cluster.dir());
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const auto start = Clock::now();
  dtrain.Signal(SIGINT);
  ASSERT_GE(dtrain.Wait(), 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.5);
  EXPECT_EQ(dtrain.exit_status().signal, 0) << dtrain.err();  // it exited, not killed
  EXPECT_EQ(dtrain.exit_status().code, 128 + SIGINT) << dtrain.err();
  EXPECT_EQ(cluster.LeftoverProcesses(1, 3), "");
}

// Logins per node, from the node's sshd log (make-cluster.sh logs at INFO).
int Logins(const SshTestCluster& cluster, int node) {
  const std::string log = ReadText(cluster.dir() + "/node" + std::to_string(node) + "/sshd.log");
  int n = 0;
  for (size_t at = 0; (at = log.find("Accepted publickey", at)) != std::string::npos; ++at) ++n;
  return n;
}

// A launch with --sync into private workdirs logs in to each node twice: the check before launch
// hands its session to the sync, the sync to the ranks, the ranks to the end-of-job fetch; the
// clock probe (its own thread) has one of its own.
TEST(SshLaunch, EachNodeIsLoggedInToTwicePerLaunch) {
  SshTestCluster cluster("dl-logins", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string project = cluster.dir() + "/project";
  const std::string logs = cluster.dir() + "/logs";
  std::system(("mkdir -p " + project + " && echo 'print(1)' > " + project + "/train.py").c_str());
  const std::string file = ClusterFileWith(cluster, "workdir: /srv/node/work\n");
  const int before[2] = {Logins(cluster, 0), Logins(cluster, 1)};
  const std::string out =
      RunOutput("cd " + project + " && " + kDtrain + " launch -q --sync -c " + file +
                " --log-dir " + logs + " --job twice -- sh -c 'cat train.py' 2>&1; echo status=$?");
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  EXPECT_EQ(ReadText(logs + "/twice/rank-1.log"), "print(1)\n");
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(Logins(cluster, node) - before[node], 2) << "node" << node << "\n" << out;
  }
}

// Ctrl-C while --sync copies the launch directory over a slow link (node1's side of the bridge
// limited to 2 Mbit/s with tc: 8 MiB would take half a minute) stops dtrain at once: the copy is
// cut short, nothing of it is left on the node, no rank starts, and job.json says interrupted.
// Then the same for `dtrain sync`, which exits 130 and says it was interrupted.
TEST(SshLaunch, CtrlCDuringASyncStopsAtOnceAndLeavesNoPartialCopy) {
  SshTestCluster cluster("dl-sync-int", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string project = cluster.dir() + "/project";
  const std::string logs = project + "/logs";
  for (int node = 0; node < 2; ++node) cluster.OnNode(node, "rm -rf /srv/node/work*");
  ASSERT_EQ(std::system(("rm -rf " + project + " && mkdir -p " + project +
                         " && head -c 8388608 /dev/urandom > " + project + "/weights.bin")
                            .c_str()),
            0);
  const std::string file = ClusterFileWith(cluster, "workdir: /srv/node/work\n");
  const std::string tbf = " root tbf rate 2mbit burst 32kbit latency 400ms 2>&1; echo rc=$?";
  const std::string slowed = RunOutput("tc qdisc add dev nd1" + tbf);
  ASSERT_NE(slowed.find("rc=0"), std::string::npos) << slowed;
  testing::DtrainProcess dtrain(
      {"launch", "-q", "--sync", "-c", file, "--log-dir", logs, "--job", "s", "--", "sleep", "300"},
      project);
  // SIGINT once node1's tar receives; false when it never did or dtrain did not end. It must end
  // within 2.5 s; the link's limit is then lifted.
  const auto interrupt_while_receiving = [&](testing::DtrainProcess& process) {
    if (!testing::WaitFor(
            [&] { return !cluster.NodeProcessesWith(1, "tar -xf - -C /srv/node/work").empty(); },
            20)) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto signalled = Clock::now();
    process.Signal(SIGINT);
    if (process.Wait(10) < 0) return false;
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - signalled).count(), 2.5);
    RunOutput("tc qdisc del dev nd1 root");
    return true;
  };
  const auto expect_nothing_left = [&] {
    EXPECT_TRUE(testing::WaitFor(
        [&] { return cluster.OnNode(1, "ls -d /srv/node/work* 2>/dev/null").empty(); }, 3))
        << cluster.OnNode(1, "ls -d /srv/node/work*");
    EXPECT_EQ(cluster.LeftoverProcesses(2, 3), "");
  };
  ASSERT_TRUE(interrupt_while_receiving(dtrain)) << dtrain.err();
  EXPECT_EQ(dtrain.exit_status().signal, 0) << dtrain.err();
  EXPECT_EQ(dtrain.exit_status().code, 128 + SIGINT) << dtrain.err();
  EXPECT_NE(dtrain.err().find("): cut short by an interrupt; its partial copy is thrown away\n"),
            std::string::npos)
      << dtrain.err();
  EXPECT_EQ(dtrain.err().find("FAILED"), std::string::npos) << dtrain.err();
  test::ExpectInterruptedBeforeStart(dtrain, logs + "/s", "s", "during --sync");
  expect_nothing_left();

  const std::string slowed_again = RunOutput("tc qdisc add dev nd1" + tbf);
  ASSERT_NE(slowed_again.find("rc=0"), std::string::npos) << slowed_again;
  testing::DtrainProcess sync({"sync", "-c", file}, project);
  ASSERT_TRUE(interrupt_while_receiving(sync)) << sync.err();
  EXPECT_EQ(sync.exit_status().signal, 0) << sync.err();
  EXPECT_EQ(sync.exit_status().code, 128 + SIGINT) << sync.err();
  EXPECT_NE(sync.err().find("dtrain: sync node1 (" + cluster.Field(1, 1) +
                            "): cut short by an interrupt; its partial copy is thrown away\n"),
            std::string::npos)
      << sync.err();
  EXPECT_EQ(sync.err().find("FAILED"), std::string::npos) << sync.err();
  EXPECT_NE(sync.err().find("dtrain: sync interrupted by SIGINT\n"), std::string::npos)
      << sync.err();
  expect_nothing_left();
}

}  // namespace
}  // namespace dtrain
