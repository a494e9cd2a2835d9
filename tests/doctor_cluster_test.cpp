// `dtrain doctor` over SSH on real sshd nodes in network namespaces (tests/cluster): all nodes
// alike; one node with another CUDA toolkit and NCCL (a fake tree bind-mounted over
// /usr/local/cuda in that node's own mount namespace); the rendezvous port blocked from one
// node (an unreachable route); one node down; wrong key, unknown host key, and an address that
// accepts TCP but never speaks SSH.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/doctor_run.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using test::DoctorRun;
using test::Findings;
using test::RunOutput;
using test::SshTestCluster;

std::vector<std::string> Nodes(const nlohmann::json& finding) {
  return finding["nodes"].get<std::vector<std::string>>();
}

// A CUDA 12.2 / NCCL 2.18.5 tree: version.json, an nvcc that prints its version, nccl.h, and
// the NCCL library name (an empty file: the probe reads names and headers, it loads nothing).
void WriteFakeCuda(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  fs::remove_all(root);
  fs::create_directories(root / "bin");
  fs::create_directories(root / "include");
  fs::create_directories(root / "lib");
  std::ofstream(root / "version.json") << "{\n   \"cuda\" : {\n      \"name\" : \"CUDA SDK\",\n    "
                                          "  \"version\" : \"12.2.2\"\n   }\n}\n";
  std::ofstream(root / "bin/nvcc") << "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                                   << "echo 'Cuda compilation tools, release 12.2, V12.2.140'\n";
  fs::permissions(root / "bin/nvcc", fs::perms::owner_all | fs::perms::group_read |
                                         fs::perms::group_exec | fs::perms::others_read |
                                         fs::perms::others_exec);
  std::ofstream(root / "include/nccl.h")
      << "#ifndef NCCL_H_\n#define NCCL_H_\n#define NCCL_MAJOR 2\n#define NCCL_MINOR 18\n"
      << "#define NCCL_PATCH 5\n#define NCCL_SUFFIX \"\"\n#define NCCL_VERSION_CODE "
         "21805\n#endif\n";
  std::ofstream(root / "lib/libnccl.so.2.18.5") << "";
  fs::create_symlink("libnccl.so.2.18.5", root / "lib/libnccl.so.2");
  fs::create_symlink("libnccl.so.2", root / "lib/libnccl.so");
}

// Mounts `tree` over /usr/local/cuda inside node i's mount namespace only (the namespace its
// sshd, and so every session on it, lives in). Without a toolkit here, a tmpfs over /usr/local
// in that namespace holds the link instead.
std::string MountFakeCuda(const SshTestCluster& cluster, int i, const std::string& tree) {
  std::string pid = RunOutput("cat " + cluster.dir() + "/node" + std::to_string(i) + "/sshd.pid");
  while (!pid.empty() && pid.back() == '\n') pid.pop_back();
  std::string script =
      std::filesystem::exists("/usr/local/cuda")
          ? "mount --bind " + tree + " \"$(readlink -f /usr/local/cuda)\""
          : "mount -t tmpfs tmpfs /usr/local && ln -s " + tree + " /usr/local/cuda";
  return RunOutput("nsenter -t " + pid + " -m sh -c '" + script + "' 2>&1; echo rc=$?");
}

TEST(DoctorCluster, AlikeThenOddCudaThenBlockedPortThenNodeDown) {
  SshTestCluster cluster("doctor", 3, 1);
  if (!cluster.error().empty()) GTEST_SKIP() << cluster.error();
  namespace fs = std::filesystem;
  const fs::path work = fs::path(cluster.dir()) / "project";
  fs::create_directories(work);
  const std::string file = cluster.dir() + "/doctor.yaml";
  std::ofstream(file) << test::ReadText(cluster.cluster_file()) << "workdir: " << work.string()
                      << "\njob: {command: [python3, train.py]}\n";

  // 1. All nodes alike.
  DoctorRun alike = test::RunDoctor("--json", file);
  ASSERT_TRUE(alike.doc.is_object()) << alike.text;
  EXPECT_EQ(alike.status, 0) << alike.text;
  for (const auto& node : alike.doc["nodes"]) {
    EXPECT_TRUE(node["reached"].get<bool>()) << node.dump();
    EXPECT_EQ(node["facts"]["rendezvous"], "ok") << node.dump();
    EXPECT_EQ(node["facts"]["pythonpath_workdir"], "yes") << node.dump();
  }
  EXPECT_EQ(alike.doc["nodes"][1]["facts"]["hostname"], "node1");

  // 2. node2 gets CUDA 12.2 and NCCL 2.18.5 in its own mount namespace.
  WriteFakeCuda(fs::path(cluster.dir()) / "fake-cuda");
  std::string mounted = MountFakeCuda(cluster, 2, cluster.dir() + "/fake-cuda");
  ASSERT_NE(mounted.find("rc=0"), std::string::npos) << mounted;
  DoctorRun odd = test::RunDoctor("--json", file);
  EXPECT_EQ(odd.status, 1) << odd.text;
  EXPECT_EQ(odd.doc["nodes"][2]["facts"]["cuda"], "12.2.2") << odd.text;
  auto cuda = Findings(odd, "cuda", "error");
  ASSERT_EQ(cuda.size(), 1u) << odd.text;
  EXPECT_EQ(Nodes(cuda[0]), std::vector<std::string>{"node2"});
  auto nccl = Findings(odd, "nccl", "error");
  ASSERT_EQ(nccl.size(), 1u) << odd.text;
  EXPECT_EQ(Nodes(nccl[0]), std::vector<std::string>{"node2"});
  EXPECT_NE(nccl[0]["message"].get<std::string>().find("node node2 has NCCL 2.18.5"),
            std::string::npos)
      << nccl[0].dump();
  EXPECT_NE(nccl[0]["remedy"].get<std::string>().find("LD_LIBRARY_PATH"), std::string::npos);

  // 3. node1 cannot reach node0 (an unreachable route inside node1's network namespace only).
  std::string route =
      RunOutput("ip netns exec " + cluster.Field(1, 2) + " ip route add unreachable " +
                cluster.Field(0, 1) + "/32 2>&1; echo rc=$?");
  ASSERT_NE(route.find("rc=0"), std::string::npos) << route;
  DoctorRun blocked = test::RunDoctor("--json", file);
  EXPECT_EQ(blocked.status, 1);
  auto rdzv = Findings(blocked, "rendezvous", "error");
  ASSERT_EQ(rdzv.size(), 1u) << blocked.text;
  EXPECT_EQ(Nodes(rdzv[0]), std::vector<std::string>{"node1"});
  EXPECT_EQ(blocked.doc["nodes"][0]["facts"]["rendezvous"], "ok");
  EXPECT_EQ(blocked.doc["nodes"][2]["facts"]["rendezvous"], "ok");

  // 4. node2 goes down: an error row with the reason; node0 and node1 are still checked.
  RunOutput("kill -KILL $(cat " + cluster.dir() + "/node2/sshd.pid)");
  DoctorRun down = test::RunDoctor("--json", file);
  EXPECT_EQ(down.status, 1);
  auto reach = Findings(down, "reach", "error");
  ASSERT_EQ(reach.size(), 1u) << down.text;
  EXPECT_EQ(Nodes(reach[0]), std::vector<std::string>{"node2"});
  EXPECT_EQ(down.doc["nodes"][2]["reached"], false);
  EXPECT_EQ(down.doc["nodes"][2]["failure"], "refused") << down.doc["nodes"][2].dump();
  EXPECT_EQ(down.doc["nodes"][0]["reached"], true);
  EXPECT_EQ(Findings(down, "cuda", "ok").size(), 1u) << "node0 and node1 still compared";
  EXPECT_EQ(Findings(down, "rendezvous", "error").size(), 1u);
}

TEST(DoctorCluster, SshFailuresCarryTheirReason) {
  SshTestCluster cluster("doctor-auth", 2, 1);
  if (!cluster.error().empty()) GTEST_SKIP() << cluster.error();
  const std::string dir = cluster.dir();
  std::string base = test::ReadText(cluster.cluster_file());
  // A key the nodes do not know.
  RunOutput("ssh-keygen -q -t ed25519 -N '' -f " + dir + "/stranger");
  std::string stranger = base;
  stranger.replace(stranger.find(dir + "/id_ed25519"), dir.size() + 11, dir + "/stranger");
  std::ofstream(dir + "/auth.yaml") << stranger;
  DoctorRun auth = test::RunDoctor("--json", dir + "/auth.yaml");
  EXPECT_EQ(auth.status, 1) << auth.text;
  ASSERT_EQ(Findings(auth, "reach", "error").size(), 2u) << auth.text;
  EXPECT_EQ(auth.doc["nodes"][0]["failure"], "auth") << auth.doc["nodes"][0].dump();
  // Host keys nobody recorded, with the strict policy.
  std::ofstream(dir + "/empty_known_hosts") << "";
  std::string unknown = base;
  unknown.replace(unknown.find(dir + "/known_hosts"), dir.size() + 12, dir + "/empty_known_hosts");
  std::ofstream(dir + "/hostkey.yaml") << unknown;
  DoctorRun hostkey = test::RunDoctor("--json", dir + "/hostkey.yaml");
  EXPECT_EQ(hostkey.status, 1) << hostkey.text;
  EXPECT_EQ(hostkey.doc["nodes"][1]["failure"], "host key") << hostkey.doc["nodes"][1].dump();

  // A third node whose address accepts TCP but never speaks SSH: a socket listening (and never
  // accepting: the kernel completes the handshake) on an extra address inside node1's namespace.
  const std::string silent_address = "10.231.0.250";
  std::ofstream(dir + "/silent.py")
      << "import socket, sys, time\ns = socket.socket()\n"
      << "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      << "s.bind((sys.argv[1], 22))\ns.listen(16)\nopen(sys.argv[2], 'w').write('up')\n"
      << "time.sleep(120)\n";
  const std::string ns = "ip netns exec " + cluster.Field(1, 2);
  std::string up = RunOutput(ns + " ip addr add " + silent_address + "/24 dev eth0 && (" + ns +
                             " python3 " + dir + "/silent.py " + silent_address + " " + dir +
                             "/silent.up >/dev/null 2>&1 &) 2>&1; echo rc=$?");
  ASSERT_NE(up.find("rc=0"), std::string::npos) << up;
  for (int i = 0; i < 50 && !std::filesystem::exists(dir + "/silent.up"); ++i) {
    usleep(100 * 1000);
  }
  ASSERT_TRUE(std::filesystem::exists(dir + "/silent.up")) << "the silent listener did not start";
  std::string silent = test::WithConnectTimeout(base, 2);
  silent += "  - {host: silent, address: " + silent_address + ", slots: 1}\n";
  std::ofstream(dir + "/silent.yaml") << silent;
  const auto start = std::chrono::steady_clock::now();
  DoctorRun timeout = test::RunDoctor("--json", dir + "/silent.yaml");
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(timeout.doc.is_object()) << timeout.text;
  EXPECT_EQ(timeout.status, 1) << timeout.text;
  const auto& node = timeout.doc["nodes"][2];
  EXPECT_EQ(node["host"], "silent");
  EXPECT_EQ(node["reached"], false);
  EXPECT_EQ(node["failure"], "timeout") << node.dump();
  EXPECT_NE(node["error"].get<std::string>().find("no SSH greeting within 2 s"), std::string::npos)
      << node.dump();
  // Given up at ssh.connect_timeout (2 s), not at the doctor's --timeout (20 s).
  EXPECT_GE(node["probe_s"].get<double>(), 1.9) << node.dump();
  EXPECT_LT(node["probe_s"].get<double>(), 6) << node.dump();
  EXPECT_LT(wall_s, 18) << timeout.text;
  auto reach = Findings(timeout, "reach", "error");
  ASSERT_EQ(reach.size(), 1u) << timeout.text;
  EXPECT_EQ(Nodes(reach[0]), std::vector<std::string>{"silent"});
  EXPECT_EQ(timeout.doc["nodes"][0]["reached"], true) << "the other nodes are still checked";
  EXPECT_EQ(timeout.doc["nodes"][1]["reached"], true);
  EXPECT_EQ(Findings(timeout, "python", "ok").size(), 1u) << timeout.text;
}

}  // namespace
}  // namespace dtrain
