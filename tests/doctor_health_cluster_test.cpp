// The doctor's health checks over SSH on real sshd nodes in network namespaces (tests/cluster),
// with stand-ins for nvidia-smi, dmesg and systemctl first on each node's PATH (node `env:` in the
// cluster file) and an InfiniBand sysfs tree under DTRAIN_PROBE_SYSFS: the stand-ins print the
// outputs of an 8-GPU HGX H100 node built from the formats recorded on a real H100, healthy on
// node0, faulty on node1 and node2. And an nvidia-smi that never answers (one ignoring SIGTERM).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/doctor_run.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/nvidia_smi_fixture.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using test::DoctorRun;
using test::Findings;
using test::RunOutput;
using test::SshTestCluster;
using test::WriteExecutable;
using test::WriteInfiniband;
using test::WriteStandIns;

// The case: three nodes alike, two of them broken. Before the health checks the doctor
// said "3 nodes, 0 errors, 0 warnings" and exited 0.
TEST(DoctorHealthCluster, FaultyNodesAreNamedAndLeftOut) {
  SshTestCluster cluster("doctor-health", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = cluster.dir();
  std::filesystem::create_directories(dir + "/project");
  // node0: healthy. node1: rows pending remap on GPU 2 and a failed remap on GPU 6, one NVLink
  // of GPU 4 inactive. node2: Xid 79 on GPU 3 in its kernel log, GPU 5 at PCIe x8 of x16.
  WriteStandIns(dir + "/node0-bin", test::HgxQuery(), "[    1.0] Linux version 6.1\n");
  std::string q1 = test::WithField(test::HgxQuery(), 2, "Remapped Rows", "Pending", "Yes");
  q1 = test::WithField(q1, 6, "Remapped Rows", "Remapping Failure Occurred", "Yes");
  WriteStandIns(dir + "/node1-bin", q1, "[    1.0] Linux version 6.1\n");
  std::ofstream(dir + "/node1-bin/nvlink.txt") << test::NvlinkStatus(8, 18, {{4, 7}});
  WriteStandIns(
      dir + "/node2-bin",
      test::WithField(test::HgxQuery(), 5, "PCI/GPU Link Info/Link Width", "Current", "8x"),
      "[    1.0] Linux version 6.1\n[ 5012.345678] NVRM: Xid (PCI:0000:5d:00): 79, "
      "pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n");
  for (int i = 0; i < 3; ++i) {
    WriteInfiniband(dir + "/node" + std::to_string(i) + "-sys", "mlx5_0", "4: ACTIVE", "5: LinkUp",
                    "400 Gb/sec (4X NDR)");
  }
  const std::string file = test::StandInClusterFile(
      cluster, 3, "workdir: " + dir + "/project\njob: {command: [python3, train.py]}\n");

  const DoctorRun text = test::RunDoctor("", file);
  EXPECT_EQ(text.status, 1) << text.text;
  EXPECT_NE(text.text.find("node node1: row remapping is pending on GPU 2: the GPU needs a reset"),
            std::string::npos)
      << text.text;
  EXPECT_NE(text.text.find("node node2: Xid 79 on GPU 3 (PCI 0000:5d:00), once this boot: GPU has "
                           "fallen off the bus"),
            std::string::npos)
      << text.text;
  std::printf("%s", text.text.c_str());  // the report the man page shows

  const DoctorRun json = test::RunDoctor("--json", file);
  ASSERT_TRUE(json.doc.is_object()) << json.text;
  EXPECT_EQ(json.status, 1);
  auto nodes_of = [&](const std::string& check, const std::string& severity) {
    std::vector<std::string> nodes;
    for (const auto& f : Findings(json, check, severity)) {
      for (const auto& n : f["nodes"]) nodes.push_back(n.get<std::string>());
    }
    return nodes;
  };
  EXPECT_EQ(nodes_of("gpu-remap", "error"), (std::vector<std::string>{"node1", "node1"}))
      << json.text;
  EXPECT_EQ(nodes_of("nvlink", "error"), std::vector<std::string>{"node1"}) << json.text;
  EXPECT_EQ(nodes_of("xid", "error"), std::vector<std::string>{"node2"}) << json.text;
  EXPECT_EQ(nodes_of("gpu-pcie", "warning"), std::vector<std::string>{"node2"}) << json.text;
  for (const auto& f : json.doc["findings"]) {  // py-spy is on no node: a warning on all
    if (f["severity"] != "error") continue;
    for (const auto& n : f["nodes"]) EXPECT_NE(n, "node0") << f.dump();
  }
  const auto& node0 = json.doc["nodes"][0]["facts"]["health"];
  EXPECT_EQ(node0["gpus"].size(), 8u) << node0.dump();
  EXPECT_EQ(node0["kernel_log"], "dmesg");
  EXPECT_EQ(node0["fabric_manager"], "active");
  EXPECT_EQ(node0["infiniband"][0]["state"], "4: ACTIVE");
  EXPECT_EQ(node0["nvidia_peermem"], true);
  EXPECT_EQ(json.doc["nodes"][2]["facts"]["health"]["xids"][0]["gpu"], 3);

  // --exclude-bad: node0 alone, which `dtrain launch --hostfile` then runs on.
  const DoctorRun excluded = test::RunDoctor("--exclude-bad -o " + dir + "/good.txt", file);
  EXPECT_EQ(excluded.status, 1);
  EXPECT_NE(excluded.text.find("wrote " + dir + "/good.txt: 1 of 3 nodes; left out: node1, node2"),
            std::string::npos)
      << excluded.text;
  const std::string hosts = test::ReadText(dir + "/good.txt");
  EXPECT_NE(hosts.find(cluster.Field(0, 1) + " slots=1  # node0\n"), std::string::npos) << hosts;
  EXPECT_NE(hosts.find("# excluded node2: node node2: Xid 79 on GPU 3"), std::string::npos)
      << hosts;
  const std::string launched = RunOutput(std::string(DTRAIN_BINARY_DIR) + "/dtrain launch -c " +
                                         file + " --hostfile " + dir + "/good.txt --log-dir " +
                                         dir + "/logs --job good -q hostname 2>&1; echo rc=$?");
  EXPECT_NE(launched.find("rc=0"), std::string::npos) << launched;
  EXPECT_EQ(test::ReadText(dir + "/logs/good/rank-0.log"), "node0\n") << launched;
  EXPECT_FALSE(std::filesystem::exists(dir + "/logs/good/rank-1.log"));
}

// An nvidia-smi that never answers (a hung driver), and one that ignores SIGTERM: named within
// the probe's limit, and nothing is left running on the nodes.
TEST(DoctorHealthCluster, HungNvidiaSmiIsNamedWithinTheTimeout) {
  SshTestCluster cluster("doctor-hung", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = cluster.dir();
  std::filesystem::create_directories(dir + "/node0-bin");
  std::filesystem::create_directories(dir + "/node1-bin");
  WriteExecutable(dir + "/node0-bin/nvidia-smi", "#!/bin/sh\nsleep 1000\n");
  WriteExecutable(dir + "/node1-bin/nvidia-smi", "#!/bin/sh\ntrap '' TERM\nsleep 1000\n");
  const std::string file =
      test::StandInClusterFile(cluster, 2, "env: {DTRAIN_PROBE_SMI_TIMEOUT: '3'}\n");
  const auto start = std::chrono::steady_clock::now();
  const DoctorRun r = test::RunDoctor("--json", file);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.doc.is_object()) << r.text;
  EXPECT_EQ(r.status, 1);
  const auto hung = Findings(r, "nvidia-smi", "error");
  ASSERT_EQ(hung.size(), 2u) << r.text;
  EXPECT_EQ(hung[0]["message"],
            "nvidia-smi did not answer within 3 s on node node0: the driver may be hung");
  EXPECT_EQ(hung[1]["nodes"][0], "node1");
  EXPECT_EQ(r.doc["nodes"][1]["reached"], true) << "the probe itself ended";
  EXPECT_LT(wall_s, 12) << r.text;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 5), "") << "timeout -k killed the stand-ins";
}

}  // namespace
}  // namespace dtrain
