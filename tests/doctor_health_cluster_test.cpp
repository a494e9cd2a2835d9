// The doctor's health checks over SSH on real sshd nodes in network namespaces (tests/cluster),
// with stand-ins for nvidia-smi, dmesg and systemctl first on each node's PATH (node `env:` in the
// cluster file) and an InfiniBand sysfs tree under DTRAIN_PROBE_SYSFS: the stand-ins print the
// outputs of an 8-GPU HGX H100 node built from the formats recorded on a real H100, healthy on
// node0, faulty on node1 and node2. And an nvidia-smi that never answers (one ignoring SIGTERM),
// and Ctrl-C while one does.
// And the PCI paths of GPUs and a NIC (tests/support/pci_sysfs.h), checked against lspci.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/doctor_run.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/nvidia_smi_fixture.h"
#include "tests/support/pci_sysfs.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using test::DoctorRun;
using test::Findings;
using test::RunOutput;
using test::SshTestCluster;
using test::WriteExecutable;
using test::WriteInfiniband;
using test::WriteStandIns;

// The issue's case: three nodes alike, two of them broken. Before the health checks the doctor
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
  const DoctorRun r = test::RunDoctor("--json", file);
  ASSERT_TRUE(r.doc.is_object()) << r.text;
  EXPECT_EQ(r.status, 1);
  const auto hung = Findings(r, "nvidia-smi", "error");
  ASSERT_EQ(hung.size(), 2u) << r.text;
  EXPECT_EQ(hung[0]["message"],
            "nvidia-smi did not answer within 3 s on node node0: the driver may be hung");
  EXPECT_EQ(hung[1]["nodes"][0], "node1");
  EXPECT_EQ(r.doc["nodes"][1]["reached"], true) << "the probe itself ended";
  EXPECT_LT(r.wall_s, 12) << r.text;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 5), "") << "timeout -k killed the stand-ins";
}

// Ctrl-C while node1's nvidia-smi hangs (its limit a minute away): the doctor stops at once,
// kills what runs on the nodes, reports node0 as checked and node1 as not judged (a warning, not
// an error), tests no connection between nodes, writes no --exclude-bad hostfile (node1 is
// neither good nor bad) and exits 130.
TEST(DoctorHealthCluster, CtrlCWhileANodeHangsReportsWhatEndedAndJudgesNothingElse) {
  SshTestCluster cluster("doctor-int", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = cluster.dir();
  std::filesystem::create_directories(dir + "/node1-bin");
  WriteExecutable(dir + "/node1-bin/nvidia-smi", "#!/bin/sh\nexec sleep 1000\n");
  const std::string file = test::StandInClusterFile(
      cluster, 2, "env: {DTRAIN_PROBE_SMI_TIMEOUT: '60'}\njob: {command: [hostname]}\n");
  const std::string good = dir + "/good.txt";
  std::filesystem::remove(good);
  testing::DtrainProcess doctor(
      {"doctor", "--json", "--timeout", "90", "--exclude-bad", "-o", good, "-c", file}, dir,
      {"NO_COLOR=1"});
  // node0's probe has run and ended: its `sh -s` and the node's wrapper around it (whose
  // arguments carry the probe's variables; the rendezvous listener's carry DTRAIN_PROBE_MODE
  // too), watched from the doctor's start (no process of it before its probe starts is not its
  // end), while node1's probe hangs in nvidia-smi; then a moment for its end to reach dtrain.
  const auto probing = [&](int node) {
    for (const std::string& p : cluster.NodeProcesses(node)) {  // "PID ARGV..."
      if (p.compare(p.find(' ') + 1, 6, "sh -s ") == 0) return true;
      if (p.find("DTRAIN_PROBE_WORKDIR=") != std::string::npos &&
          p.find("DTRAIN_PROBE_MODE=") == std::string::npos) {
        return true;
      }
    }
    return false;
  };
  bool node0_seen = false;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const bool running = probing(0);
        node0_seen = node0_seen || running;
        return node0_seen && !running && !cluster.NodeProcessesWith(1, "sleep 1000").empty();
      },
      30))
      << "node0's probe " << (node0_seen ? "never ended" : "was never seen") << doctor.err();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto signalled = std::chrono::steady_clock::now();
  doctor.Signal(SIGINT);
  ASSERT_GE(doctor.Wait(10), 0) << doctor.err();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count(),
            2.5);
  EXPECT_EQ(doctor.exit_status().signal, 0) << doctor.err();  // it exited, not killed
  EXPECT_EQ(doctor.exit_status().code, 128 + SIGINT) << doctor.err();
  const nlohmann::json doc = nlohmann::json::parse(doctor.out(), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << doctor.out() << doctor.err();
  EXPECT_EQ(doc["interrupted"], (nlohmann::json{{"signal", "SIGINT"}, {"during", "the probes"}}));
  EXPECT_EQ(doc["nodes"][0]["reached"], true);
  EXPECT_EQ(doc["nodes"][1]["reached"], false);
  EXPECT_EQ(doc["nodes"][1]["failure"], "cut short");
  for (const auto& f : doc["findings"]) EXPECT_NE(f["severity"], "error") << f.dump();
  test::DoctorRun run;
  run.doc = doc;
  const auto reach = Findings(run, "reach", "warning");
  ASSERT_EQ(reach.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(reach[0]["nodes"], nlohmann::json::array({"node1"}));
  EXPECT_EQ(reach[0]["message"],
            "node node1 not checked: the doctor was interrupted before its probe ended");
  const auto peers = Findings(run, "peers", "warning");
  ASSERT_EQ(peers.size(), 1u) << doc["findings"].dump(2);
  EXPECT_EQ(peers[0]["message"],
            "the connections between nodes were not tested: the doctor was interrupted first");
  EXPECT_NE(doctor.err().find("dtrain doctor: interrupted by SIGINT during the probes after "),
            std::string::npos)
      << doctor.err();
  EXPECT_NE(doctor.err().find(good + " was not written"), std::string::npos) << doctor.err();
  EXPECT_FALSE(std::filesystem::exists(good));
  EXPECT_EQ(cluster.LeftoverProcesses(2, 5), "");
}

// The cluster file's own health checks over SSH, against real faults in each node's own mount
// namespace: node1's scratch (its private tmpfs at /srv/node) unmounted, node2's status file a
// FIFO nobody writes, so that reading it hangs as on a dead network file system. The doctor names
// both nodes with what the check printed, stops the hung read at its limit (nothing is left
// running), and --exclude-bad leaves both nodes out.
TEST(DoctorHealthCluster, SiteHealthChecksNameAnUnmountedScratchAndAHungRead) {
  SshTestCluster cluster("doctor-site-checks", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = cluster.dir();
  std::filesystem::create_directories(dir + "/project");
  EXPECT_EQ(cluster.OnNode(0, "echo ready >/srv/node/status"), "");
  EXPECT_EQ(cluster.OnNode(1, "umount -l /srv/node"), "");
  EXPECT_EQ(cluster.OnNode(2, "mkfifo /srv/node/status"), "");
  const std::string file = dir + "/site-checks.yaml";
  std::ofstream(file) << test::ReadText(cluster.cluster_file()) << "workdir: " << dir
                      << "/project\njob: {command: [python3, train.py]}\n"
                      << R"yaml(health_checks:
  - name: scratch
    run: mountpoint -q /srv/node || { echo "/srv/node is not mounted on $(hostname)"; exit 1; }
    fix: mount the node's scratch again
  - name: scratch-status
    run: grep -q ready /srv/node/status
    timeout: 2
)yaml";
  const DoctorRun r = test::RunDoctor("--json", file);
  ASSERT_TRUE(r.doc.is_object()) << r.text;
  EXPECT_EQ(r.status, 1);
  std::vector<std::string> said;
  for (const auto& f : Findings(r, "health_check", "error")) {
    said.push_back(f["nodes"][0].get<std::string>() + ": " + f["message"].get<std::string>());
  }
  EXPECT_EQ(said, (std::vector<std::string>{
                      "node1: node node1: health check 'scratch' failed (exit 1): /srv/node is "
                      "not mounted on node1",
                      "node1: node node1: health check 'scratch-status' failed (exit 2): grep: "
                      "/srv/node/status: No such file or directory",
                      "node2: node node2: health check 'scratch-status' did not end in 2 s"}))
      << r.text;
  EXPECT_EQ(r.doc["nodes"][2]["reached"], true) << "the probe waited for the check's limit";
  EXPECT_EQ(r.doc["nodes"][0]["facts"]["health"]["health_checks"]["scratch"]["exit_status"], 0);
  EXPECT_LT(r.wall_s, 15) << r.text;
  EXPECT_EQ(cluster.LeftoverProcesses(3, 5), "") << "the hung grep was stopped";

  const DoctorRun excluded = test::RunDoctor("--exclude-bad -o " + dir + "/good.txt", file);
  EXPECT_NE(excluded.text.find("wrote " + dir + "/good.txt: 1 of 3 nodes; left out: node1, node2"),
            std::string::npos)
      << excluded.text;
  EXPECT_NE(excluded.text.find("-> mount the node's scratch again"), std::string::npos)
      << excluded.text;
}

// The job's variables name a second interface, hsn0, on each node: node0 has it, up; node1's
// switch port for it is down (the head end of its veth, so the node's side loses its carrier);
// node2's second NIC is named ens5. NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME come from the
// cluster file's env_file, as the ranks get them. The doctor names node1's link and node2's
// missing name, for NCCL and for Gloo, and leaves node0 alone.
TEST(DoctorHealthCluster, InterfacesTheJobsVariablesNameMissingOrDown) {
  SshTestCluster cluster("doctor-ifname", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = cluster.dir();
  EXPECT_EQ(test::AddSecondNic(cluster, 0, "hsn0"), "");
  EXPECT_EQ(test::AddSecondNic(cluster, 1, "hsn0"), "");
  EXPECT_EQ(test::AddSecondNic(cluster, 2, "ens5"), "");
  EXPECT_EQ(test::SetSecondNicPort(cluster, 1, "down"), "");
  std::ofstream(dir + "/job.env") << "NCCL_SOCKET_IFNAME=hsn0\nGLOO_SOCKET_IFNAME=hsn0\n";
  const std::string file = dir + "/ifname.yaml";
  std::ofstream(file) << test::ReadText(cluster.cluster_file()) << "env_file: job.env\n";
  const DoctorRun r = test::RunDoctor("--json", file);
  ASSERT_TRUE(r.doc.is_object()) << r.text;
  EXPECT_EQ(r.status, 1);
  std::vector<std::string> said;
  for (const auto& f : Findings(r, "interface", "error")) said.push_back(f["message"]);
  EXPECT_EQ(said, (std::vector<std::string>{
                      "node node1: NCCL_SOCKET_IFNAME=hsn0 picks hsn0, whose link is down: "
                      "NCCL's connections over it fail or hang",
                      "node node1: GLOO_SOCKET_IFNAME=hsn0: the link of hsn0 is down: Gloo's "
                      "connections over it fail or hang",
                      "node node2: NCCL_SOCKET_IFNAME=hsn0 matches none of its interfaces with an "
                      "address (ens5, eth0, lo): NCCL stops at init (\"Bootstrap : no socket "
                      "interface found\")",
                      "node node2: GLOO_SOCKET_IFNAME=hsn0: it has no interface hsn0 with an "
                      "address (it has ens5, eth0, lo): Gloo stops at init (\"Unable to find "
                      "address for: hsn0\")"}))
      << r.text;
  const auto& node1 = r.doc["nodes"][1]["facts"]["health"];
  EXPECT_EQ(node1["interface_env"]["GLOO_SOCKET_IFNAME"], "hsn0") << node1.dump();
}

// lspci's ACSCtl line of each device in `dump` (lspci -F reads `lspci -xxxx` dumps), by address:
// "SrcValid+ TransBlk- ReqRedir+ ...".
std::map<std::string, std::string> LspciAcsControl(const std::string& dump) {
  std::map<std::string, std::string> out;
  std::istringstream lines(RunOutput("lspci -F " + dump + " -vvv 2>&1"));
  std::string device;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != '\t' && line[0] != ' ') device = line.substr(0, line.find(' '));
    const size_t at = line.find("ACSCtl:");
    if (at != std::string::npos) out["0000:" + device] = line.substr(at + 8);
  }
  return out;
}

// The bits of an ACS control register, as lspci writes them.
std::string AcsNames(int control) {
  const char* names[] = {"SrcValid",    "TransBlk",   "ReqRedir",   "CmpltRedir",
                         "UpstreamFwd", "EgressCtrl", "DirectTrans"};
  std::string out;
  for (int bit = 0; bit < 7; ++bit) {
    out += std::string(out.empty() ? "" : " ") + names[bit] + ((control >> bit) & 1 ? "+" : "-");
  }
  return out;
}

// Two bare-metal HGX nodes with a PCIe switch above GPUs 0 and 1 and the NIC mlx5_0 in their
// sysfs stand-ins. node1 is set up badly: ACS redirecting on the switch's ports, an IOMMU
// translating the devices' DMA, its sshd (so every session it starts) allowed to lock only
// 64 KiB, and MIG on for GPU 2. (node0 keeps this machine's own locked-memory limit: raising it
// to unlimited takes CAP_SYS_RESOURCE, which a container may lack.) The probe reads each bridge's
// configuration space as lspci does: the registers it reports are the ones lspci decodes from the
// same bytes.
TEST(DoctorHealthCluster, SwitchAcsIommuLockedMemoryAndMigAreNamed) {
  SshTestCluster cluster("doctor-pci", 2, 1);
  REQUIRE_CLUSTER(cluster);
  ASSERT_EQ(std::system("command -v lspci >/dev/null"), 0)
      << "lspci (pciutils) is needed; scripts/install-deps.sh --tests installs it";
  const std::string dir = cluster.dir();
  std::vector<test::PciFunction> bridges;
  for (int i = 0; i < 2; ++i) {
    const std::string node = dir + "/node" + std::to_string(i);
    std::string q = test::HgxQuery();
    for (int g = 0; g < 8; ++g) {
      q = test::WithField(q, g, "GPU Virtualization Mode", "Virtualization Mode", "None");
    }
    if (i == 1) q = test::WithField(q, 2, "MIG Mode", "Current", "Enabled");
    WriteStandIns(node + "-bin", q, "[    1.0] Linux version 6.1\n");
    WriteInfiniband(node + "-sys", "mlx5_0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
    const int acs = i == 1 ? 0x001d : 0x0000;
    const std::string iommu = i == 1 ? "DMA-FQ" : "identity";
    const std::vector<std::string> root = {"0000:15:01.0"};
    const std::vector<std::string> up = {"0000:15:01.0", "0000:16:00.0"};
    auto below = [](std::vector<std::string> path, const std::string& address) {
      path.push_back(address);
      return path;
    };
    using test::Pci;
    const std::vector<test::PciFunction> functions = {
        // Root port: AER, then ACS; node0's as a user other than root reads it.
        Pci(root, 0x8086, 0x060400, 4, {{0x0001}, {0x000d, 0x001d}}, "", "", i == 1),
        Pci(up, 0x10b5, 0x060400, 5, {{0x0001}}),
        // Downstream ports: ACS after AER, Secondary PCIe and DPC; ACS alone.
        Pci(below(up, "0000:17:00.0"), 0x10b5, 0x060400, 6,
            {{0x0001}, {0x0019}, {0x001d}, {0x000d, acs}}),
        Pci(below(up, "0000:17:01.0"), 0x10b5, 0x060400, 6, {{0x000d, acs}}),
        Pci(below(up, "0000:17:02.0"), 0x10b5, 0x060400, 6, {{0x000d, acs | 0x0002}}),
        Pci(below(below(up, "0000:17:00.0"), "0000:18:00.0"), 0x10de, 0x030200, 0, {{0x0001}},
            iommu),
        Pci(below(below(up, "0000:17:02.0"), "0000:2a:00.0"), 0x10de, 0x030200, 0, {{0x0001}},
            iommu),
        Pci(below(below(up, "0000:17:01.0"), "0000:19:00.0"), 0x15b3, 0x020700, 0, {{0x0001}},
            iommu, "mlx5_0"),
    };
    for (const test::PciFunction& f : functions) {
      test::WritePciFunction(node + "-sys", f);
      if (i == 1 && f.class_code == 0x060400) bridges.push_back(f);
    }
  }
  // node1's sshd, and so every session it starts (the nodes' sshd runs without PAM), may lock
  // 64 KiB; node0's keeps this machine's limit.
  const pid_t sshd = std::stoi(test::ReadText(dir + "/node1/sshd.pid"));
  const struct rlimit low = {64 * 1024, 64 * 1024};
  ASSERT_EQ(::prlimit(sshd, RLIMIT_MEMLOCK, &low, nullptr), 0) << std::strerror(errno);
  struct rlimit own = {};
  ::getrlimit(RLIMIT_MEMLOCK, &own);
  const long long own_kib = own.rlim_cur == RLIM_INFINITY ? -1 : own.rlim_cur / 1024;
  const std::string file = test::StandInClusterFile(cluster, 2, "");

  const DoctorRun r = test::RunDoctor("--json", file);
  ASSERT_TRUE(r.doc.is_object()) << r.text;
  EXPECT_EQ(r.status, 1) << "MIG on is an error";
  auto only = [&](const std::string& check, const std::string& severity) {
    const auto found = Findings(r, check, severity);
    EXPECT_EQ(found.size(), 1u) << check << "\n" << r.text;
    return found.empty() ? nlohmann::json() : found[0];
  };
  const auto acs = only("pci-acs", "warning");
  EXPECT_EQ(acs["nodes"], nlohmann::json({"node1"}));
  EXPECT_EQ(acs["message"],
            "node node1: PCIe switch ports with ACS redirecting peer-to-peer traffic to the CPU: "
            "0000:17:00.0 above GPU 0 (ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+); "
            "0000:17:02.0 above GPU 1 (ACSCtl SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ "
            "UpstreamFwd+); 0000:17:01.0 above mlx5_0 (ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ "
            "UpstreamFwd+)");
  const auto iommu = only("iommu", "warning");
  EXPECT_EQ(iommu["message"],
            "node node1: the IOMMU translates the DMA of GPU 0, GPU 1, mlx5_0 (IOMMU group type "
            "DMA-FQ)");
  const auto memlock = Findings(r, "memlock", "warning");
  ASSERT_EQ(memlock.size(), own_kib < 0 ? 1u : 2u) << r.text;
  EXPECT_EQ(memlock.back()["nodes"], nlohmann::json({"node1"}));
  EXPECT_NE(memlock.back()["message"].get<std::string>().find("may lock only 64 KiB"),
            std::string::npos);
  const auto mig = only("gpu-mig", "error");
  EXPECT_EQ(mig["nodes"], nlohmann::json({"node1"}));
  EXPECT_NE(mig["message"].get<std::string>().find("MIG mode is on for GPU 2"), std::string::npos);

  const auto& h0 = r.doc["nodes"][0]["facts"];
  const auto& h1 = r.doc["nodes"][1]["facts"];
  EXPECT_EQ(h0["memlock_kib"], own_kib);
  EXPECT_EQ(h1["memlock_kib"], 64);
  EXPECT_EQ(h0["health"]["pci_acs_control"]["0000:15:01.0"], "unreadable");
  EXPECT_EQ(h0["health"]["pci_acs_control"]["0000:17:00.0"], 0);
  EXPECT_FALSE(h0["health"]["pci_acs_control"].contains("0000:16:00.0")) << "no ACS there";
  const auto& devices = h1["health"]["pci_devices"];
  ASSERT_EQ(devices.size(), 3u) << devices.dump();
  EXPECT_EQ(devices[2]["kind"], "nic");
  EXPECT_EQ(devices[2]["name"], "mlx5_0");
  EXPECT_EQ(devices[2]["address"], "0000:19:00.0");
  EXPECT_EQ(devices[2]["bridges"],
            nlohmann::json({"0000:15:01.0", "0000:16:00.0", "0000:17:01.0"}));

  // What lspci decodes from the same bytes, bridge by bridge.
  std::ofstream(dir + "/bridges.dump") << test::LspciDump(bridges);
  const auto lspci = LspciAcsControl(dir + "/bridges.dump");
  ASSERT_EQ(lspci.size(), 4u) << "root port and three downstream ports";
  const auto& read = h1["health"]["pci_acs_control"];
  for (const auto& [address, line] : lspci) {
    ASSERT_TRUE(read.contains(address)) << address << " " << read.dump();
    EXPECT_EQ(AcsNames(read[address].get<int>()), line) << address;
  }
  EXPECT_NE(lspci.at("0000:17:02.0").find("TransBlk+"), std::string::npos);
}

}  // namespace
}  // namespace dtrain
