// SshTestCluster: N sshd nodes in network namespaces (tests/cluster/make-cluster.sh) for one
// test, torn down when it goes out of scope. The test process joins the cluster's head
// namespace so the nodes' addresses are reachable from it and from every child it starts.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "launcher/cluster_spec.h"
#include "tests/support/test_paths.h"

namespace dtrain::test {

inline std::string RunOutput(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fresh, empty folder /srv/node/NAME. Every namespace node mounts storage of its own on
// /srv/node (make-cluster.sh), so a job folder there is on each node's own disk, as on nodes
// that share no storage; this machine's /srv/node is its own too.
inline std::string FreshPrivateFolder(const std::string& name) {
  const std::string path = "/srv/node/" + name;
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

// `text`, a cluster file make-cluster.sh wrote (or a copy of one), with the nodes' ssh connect
// timeout `seconds` in place of its 5: a node that never answers is found unreached sooner.
inline std::string WithConnectTimeout(std::string text, int seconds) {
  const std::string given = "connect_timeout: 5";
  text.replace(text.find(given), given.size(), "connect_timeout: " + std::to_string(seconds));
  return text;
}

class SshTestCluster {
 public:
  // Empty error(): the cluster is up. Otherwise it says why not (e.g. not root).
  SshTestCluster(const std::string& name, int nodes, int slots)
      : dir_(std::string(DTRAIN_BINARY_DIR) + "/ssh-test-clusters/" + name) {
    if (geteuid() != 0) {
      error_ = "needs root (network namespaces and sshd)";
      return;
    }
    // Whatever an earlier run left (logs, keys) goes first.
    RunOutput(Script() + " down " + dir_ + " >/dev/null 2>&1; rm -rf " + dir_);
    const std::string up = Script() + " up " + std::to_string(nodes) + " " + dir_ + " " +
                           std::to_string(slots) + " 2>&1";
    const std::string log = RunOutput(up + "; echo rc=$?");
    if (log.find("rc=0") == std::string::npos) {
      error_ = "make-cluster.sh up failed: " + log;
      return;
    }
    const std::string head = "/run/netns/" + Trim(ReadText(dir_ + "/head-netns"));
    const int fd = open(head.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) error_ = "cannot join " + head;
    if (fd >= 0) close(fd);
  }
  ~SshTestCluster() {
    if (geteuid() == 0) RunOutput(Script() + " down " + dir_ + " 2>&1");
  }

  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }
  std::string cluster_file() const { return dir_ + "/cluster.yaml"; }
  ClusterSpec Spec() const { return ParseClusterFile(cluster_file()); }

  // Processes inside node i's namespace other than its listening sshd, as "pid cmdline" lines.
  std::vector<std::string> NodeProcesses(int i) const {
    const std::string listener = Trim(ReadText(dir_ + "/node" + std::to_string(i) + "/sshd.pid"));
    const std::string ns = Field(i, 2);
    std::vector<std::string> out;
    std::istringstream pids(RunOutput("ip netns pids " + ns));
    std::string pid;
    while (pids >> pid) {
      if (pid == listener) continue;
      std::string cmdline = ReadText("/proc/" + pid + "/cmdline");
      for (char& c : cmdline) {
        if (c == '\0') c = ' ';
      }
      if (cmdline.empty()) continue;  // already gone (or a zombie)
      out.push_back(pid + " " + cmdline);
    }
    return out;
  }

  // Node i's processes (as NodeProcesses) but sshd's own ("sshd: root@notty", "sshd-session"):
  // what dtrain left running there. A connection whose client was cut off keeps its sshd until
  // TCP keepalive ends it, hours later; nothing of dtrain's may stay with it.
  std::vector<std::string> NodeProcessesBesidesSshd(int i) const {
    std::vector<std::string> out;
    for (const std::string& p : NodeProcesses(i)) {
      if (p.compare(p.find(' ') + 1, 4, "sshd") != 0) out.push_back(p);
    }
    return out;
  }

  // Node i's processes (as NodeProcesses) whose command line holds `text`: a rank left behind.
  std::vector<std::string> NodeProcessesWith(int i, const std::string& text) const {
    std::vector<std::string> out;
    for (const std::string& p : NodeProcesses(i)) {
      if (p.find(text) != std::string::npos) out.push_back(p);
    }
    return out;
  }

  // The processes of nodes 0..count-1 whose command line holds `text`, a line each ("nodeN:
  // pid cmdline"); "" when none runs (no rank left behind).
  std::string ProcessesOnNodesWith(int count, const std::string& text) const {
    std::string out;
    for (int i = 0; i < count; ++i) {
      for (const std::string& p : NodeProcessesWith(i, text))
        out += "node" + std::to_string(i) + ": " + p + "\n";
    }
    return out;
  }

  // Waits up to `seconds` until nodes 0..count-1 each run `command` itself (its argv[0] and
  // arguments, e.g. "sleep 300"; not a shell whose command line contains it).
  bool WaitForCommandOnNodes(int count, const std::string& command, double seconds) const {
    auto running = [&](int node) {
      for (const std::string& p : NodeProcesses(node)) {
        if (p.find(" " + command) == p.find(' ')) return true;
      }
      return false;
    };
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    while (true) {
      bool all = true;
      for (int i = 0; i < count && all; ++i) all = running(i);
      if (all) return true;
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  // What still runs on nodes 0..count-1 once each had up to `seconds` to go idle: "" when all
  // are idle, else a line per busy node naming its first leftover process.
  std::string LeftoverProcesses(int count, double seconds) const {
    std::string out;
    for (int i = 0; i < count; ++i) {
      const std::vector<std::string> left = WaitNodeIdle(i, seconds);
      if (!left.empty()) out += "node" + std::to_string(i) + " still runs " + left.front() + "\n";
    }
    return out;
  }

  // Waits up to `seconds` for node i to run nothing but its listener; returns what is left.
  std::vector<std::string> WaitNodeIdle(int i, double seconds) const {
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    std::vector<std::string> left = NodeProcesses(i);
    while (!left.empty() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      left = NodeProcesses(i);
    }
    return left;
  }

  // Runs `command` under sh inside node i (its network, hostname and private /srv/node);
  // returns what it printed (stdout and stderr).
  std::string OnNode(int i, const std::string& command) const {
    std::string quoted = "'";
    for (char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
    return RunOutput(InNode(i) + " sh -c " + quoted + " 2>&1");
  }

  // The command prefix that runs what follows it inside node i.
  std::string InNode(int i) const { return Script() + " node " + dir_ + " " + std::to_string(i); }

  // The namespace the bridge br0 and the launcher are in.
  std::string HeadNamespace() const { return Trim(ReadText(dir_ + "/head-netns")); }

  // Makes nodes unreachable from the launcher (only other nodes reach them).
  void Hide(const std::vector<int>& nodes) const {
    std::string list;
    for (int i : nodes) list += " " + std::to_string(i);
    RunOutput(Script() + " hide " + dir_ + list + " 2>&1");
  }

  // Field f of line i in DIR/nodes ("name address netns").
  std::string Field(int i, int f) const {
    std::istringstream lines(ReadText(dir_ + "/nodes"));
    std::string line;
    for (int n = 0; std::getline(lines, line); ++n) {
      if (n != i) continue;
      std::istringstream words(line);
      std::string word;
      for (int k = 0; words >> word; ++k) {
        if (k == f) return word;
      }
    }
    return "";
  }

 private:
  static std::string Script() {
    return std::string(DTRAIN_SOURCE_DIR) + "/tests/cluster/make-cluster.sh";
  }
  static std::string Trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  std::string dir_;
  std::string error_;
};

// Gives node `i` of `cluster` a second network interface `name`, 10.232.0.(10+i)/24, on the same
// bridge as its first (its switch port in the head namespace is "sw<i>": SetSecondNicPort); ""
// on success, else what `ip` said.
inline std::string AddSecondNic(const SshTestCluster& cluster, int i, const std::string& name) {
  const std::string head = cluster.HeadNamespace(), ns = cluster.Field(i, 2),
                    port = "sw" + std::to_string(i);
  return RunOutput("ip -n " + head + " link add " + port + " type veth peer name " + name +
                   " netns " + ns + " && ip -n " + head + " link set " + port +
                   " master br0 up && ip -n " + ns + " addr add 10.232.0." +
                   std::to_string(10 + i) + "/24 dev " + name + " && ip -n " + ns + " link set " +
                   name + " up 2>&1");
}

// Puts the launcher's side (the head namespace's bridge) on the second NICs' network too
// (10.232.0.1/24), as a launcher that reaches the nodes' fast network: elastic Horovod's workers
// are told of new hosts at their HOROVOD_GLOO_IFACE address. "" on success, else what `ip` said.
inline std::string ReachSecondNics(const SshTestCluster& cluster) {
  return RunOutput("ip -n " + cluster.HeadNamespace() + " addr add 10.232.0.1/24 dev br0 2>&1");
}

// Sets the switch port of node `i`'s second interface (AddSecondNic) "up" or "down": down, the
// node's side loses its carrier (operstate lowerlayerdown), as with a cut cable or a dead switch
// port; "nomaster" takes it off the bridge with its link up, as a port in the wrong VLAN. "" on
// success, else what `ip` said.
inline std::string SetSecondNicPort(const SshTestCluster& cluster, int i,
                                    const std::string& state) {
  return RunOutput("ip -n " + cluster.HeadNamespace() + " link set sw" + std::to_string(i) + " " +
                   state + " 2>&1");
}

}  // namespace dtrain::test

// Skips the test when the cluster could not be made for lack of root; fails it otherwise.
#define REQUIRE_CLUSTER(c)                           \
  if (!(c).error().empty()) {                        \
    if (geteuid() != 0) GTEST_SKIP() << (c).error(); \
    FAIL() << (c).error();                           \
  }
