// The doctor's health rules on nvidia-smi outputs recorded on a real H100 (the healthy case) and
// on variants of them with one fault each (tests/support/nvidia_smi_fixture.h); an 8-GPU HGX
// H100 node built from the same formats; the kernel log, InfiniBand, host rules; the JSON; and
// the hostfile of `--exclude-bad`, read back by the launcher's hostfile parser.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor/checks.h"
#include "doctor/healthy_hostfile.h"
#include "doctor/nvidia_smi_report.h"
#include "doctor/report.h"
#include "launcher/host_list.h"
#include "tests/support/nvidia_smi_fixture.h"

namespace dtrain {
namespace {

using test::FixtureText;
using test::GpuProbeLines;
using test::HgxQuery;
using test::HgxTopology;
using test::NvlinkStatus;
using test::RecordedQuery;
using test::RecordedTopology;
using test::WithField;
using test::WithLine;

const std::set<std::string> kHealthChecks = {
    "nvidia-smi",   "gpu-count",       "gpu-ecc",  "gpu-remap",    "gpu-retired-pages",
    "gpu-ecc-mode", "gpu-persistence", "gpu-pcie", "gpu-slowdown", "gpu-busy",
    "nvlink",       "fabric-manager",  "xid",      "sxid",         "kernel-log",
    "infiniband",   "infiniband-rate", "peermem",  "disk",         "swap",
    "clocksource"};

// The probe's output recorded on the H100 node (tests/fixtures/h100-node/probe.txt) without its
// GPU lines, plus a healthy host's health lines.
std::string RecordedProbeBase(int gpus_in_driver) {
  std::string out;
  for (const std::string& line : test::SplitLines(FixtureText("probe.txt"))) {
    if (line.rfind("gpu=", 0) == 0 || line.rfind("gpu_proc=", 0) == 0 || line == "probe_end=1") {
      continue;
    }
    out += line + "\n";
  }
  for (int i = 0; i < gpus_in_driver; ++i) out += "gpu_proc=NVIDIA H100 80GB HBM3\n";
  out += "swap_kib=0\nclocksource=tsc\nclocksources_available=tsc kvm-clock\n";
  out += "free_space=workdir;66527632;/;/root\nfree_space=/tmp;66527632;/;/tmp\n";
  return out;
}

// One H100 node: the recorded -q (or `query`), topo -m and a GPU without NVLink peers.
std::string H100Probe(const std::string& query = RecordedQuery(), const std::string& kernel = "",
                      const std::string& extra = "") {
  return RecordedProbeBase(1) + GpuProbeLines(1, query, RecordedTopology(), "", kernel) + extra +
         "probe_end=1\n";
}

// One HGX H100 node with 8 GPUs.
std::string HgxProbe(const std::string& query = HgxQuery(),
                     const std::string& nvlink = NvlinkStatus(),
                     const std::string& fabric_manager = "active") {
  return RecordedProbeBase(8) + GpuProbeLines(8, query, HgxTopology(), nvlink, "", fabric_manager) +
         "probe_end=1\n";
}

NodeFacts Node(const std::string& host, const std::string& probe) {
  NodeFacts n;
  n.host = host;
  n.address = "10.0.0." + std::to_string(host.size());
  n.slots = 1;
  ApplyProbeLines(SplitProbeOutput(probe), -1, n);
  return n;
}

std::vector<Finding> Health(const std::vector<NodeFacts>& nodes) {
  ClusterSpec spec;
  for (const NodeFacts& n : nodes) {
    NodeSpec s;
    s.host = n.host;
    s.address = n.address;
    spec.nodes.push_back(s);
  }
  ProbeRun run;
  run.nodes = nodes;
  std::vector<Finding> out;
  for (Finding& f : CheckCluster(spec, run)) {
    if (kHealthChecks.count(f.check) && f.severity != Severity::kOk) out.push_back(std::move(f));
  }
  return out;
}

std::string Describe(const std::vector<Finding>& findings) {
  std::string out;
  for (const Finding& f : findings) {
    out += std::string(SeverityName(f.severity)) + " [" + f.check + "] " + f.message + "\n";
  }
  return out;
}

// The one finding of `check`, or a failure.
const Finding* Only(const std::vector<Finding>& findings, const std::string& check) {
  const Finding* found = nullptr;
  for (const Finding& f : findings) {
    if (f.check != check) continue;
    if (found) return nullptr;
    found = &f;
  }
  return found;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DoctorNvidiaSmiReport, RecordedH100) {
  const NvidiaSmiReport r = ParseNvidiaSmiQuery(RecordedQuery());
  EXPECT_EQ(r.driver, "580.159.04");
  EXPECT_EQ(r.attached, 1);
  ASSERT_EQ(r.gpus.size(), 1u);
  const GpuHealth& g = r.gpus[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.bus_id, "00000000:00:06.0");
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.persistence_mode, "Enabled");
  EXPECT_EQ(g.ecc_current, "Enabled");
  EXPECT_EQ(g.ecc_pending, "Enabled");
  EXPECT_EQ(g.dram_uncorrectable, 0);
  EXPECT_EQ(g.sram_uncorrectable, 0);
  EXPECT_EQ(g.remapped_rows_pending, "No");
  EXPECT_EQ(g.remapping_failure, "No");
  EXPECT_EQ(g.retired_pages_pending, "N/A");
  EXPECT_EQ(g.pcie_gen_max, 5);
  EXPECT_EQ(g.pcie_gen_current, 5);
  EXPECT_EQ(g.pcie_width_max, 16);
  EXPECT_EQ(g.pcie_width_current, 16);
  EXPECT_TRUE(g.idle);
  EXPECT_TRUE(g.hw_slowdowns.empty());
  EXPECT_EQ(g.fb_used_mib, 0);
  EXPECT_EQ(g.fb_total_mib, 81559);
  EXPECT_TRUE(g.processes.empty());
  EXPECT_EQ(g.fabric_state, "N/A");
  EXPECT_EQ(ParseTopologyNvlinkPeers(RecordedTopology()), std::vector<int>{0});
  EXPECT_EQ(PciDeviceKey("00000000:00:06.0"), "0000:00:06");
  EXPECT_EQ(PciDeviceKey("PCI:0000:00:06"), "0000:00:06");
  EXPECT_EQ(PciDeviceKey("0000:DB:00.0"), "0000:db:00");
  EXPECT_EQ(PciDeviceKey("GPU-1234"), "");
  // The probe squeezes the padding before the colons; the parse is the same.
  NodeFacts n = Node("gpu-a", H100Probe());
  ASSERT_TRUE(n.health.smi_reported);
  ASSERT_EQ(n.health.smi.gpus.size(), 1u);
  EXPECT_EQ(n.health.smi.gpus[0].fb_total_mib, 81559);
  EXPECT_EQ(n.health.smi.gpus[0].remapped_rows_pending, "No");
}

TEST(DoctorHealth, RecordedH100IsHealthy) {
  const auto findings = Health({Node("gpu-a", H100Probe()), Node("gpu-b", H100Probe())});
  EXPECT_TRUE(findings.empty()) << Describe(findings);
}

TEST(DoctorHealth, HgxH100WithEightGpusIsHealthy) {
  const NodeFacts n = Node("hgx-a", HgxProbe());
  ASSERT_EQ(n.health.smi.gpus.size(), 8u);
  EXPECT_EQ(n.health.smi.attached, 8);
  EXPECT_EQ(n.health.smi.gpus[7].bus_id, "00000000:DB:00.0");
  EXPECT_EQ(n.health.smi.gpus[7].index, 7);
  EXPECT_EQ(n.health.smi.gpus[3].fabric_state, "Completed");
  EXPECT_EQ(n.health.nvlink_peers, std::vector<int>(8, 7));
  ASSERT_EQ(n.health.nvlinks.size(), 8u);
  EXPECT_EQ(n.health.nvlinks[5].active, 18);
  EXPECT_EQ(n.gpus.size(), 8u);
  const auto findings = Health({n, Node("hgx-b", HgxProbe())});
  EXPECT_TRUE(findings.empty()) << Describe(findings);
}

TEST(DoctorHealth, RemappedRowsPendingNeedsAReset) {
  const auto findings = Health(
      {Node("gpu-a", H100Probe(WithField(RecordedQuery(), 0, "Remapped Rows", "Pending", "Yes")))});
  const Finding* f = Only(findings, "gpu-remap");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->message, "node gpu-a: row remapping is pending on GPU 0: the GPU needs a reset");
  EXPECT_TRUE(Has(f->remedy, "nvidia-smi -r")) << f->remedy;
}

TEST(DoctorHealth, RemappingFailureMeansReplaceTheGpu) {
  const auto findings =
      Health({Node("gpu-a", H100Probe(WithField(RecordedQuery(), 0, "Remapped Rows",
                                                "Remapping Failure Occurred", "Yes")))});
  const Finding* f = Only(findings, "gpu-remap");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_TRUE(Has(f->message, "row remapping failed on GPU 0")) << f->message;
  EXPECT_TRUE(Has(f->remedy, "replace the GPU")) << f->remedy;
}

TEST(DoctorHealth, VolatileUncorrectableEccIsAnError) {
  std::string q = WithField(HgxQuery(), 2, "ECC Errors/Volatile", "DRAM Uncorrectable", "3");
  q = WithField(q, 5, "ECC Errors/Volatile", "SRAM Uncorrectable Parity", "1");
  const auto findings = Health({Node("hgx-a", HgxProbe(q))});
  const Finding* f = Only(findings, "gpu-ecc");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->message,
            "node hgx-a: uncorrectable ECC errors since the driver loaded on GPU 2 (3 DRAM, 0 "
            "SRAM), GPU 5 (0 DRAM, 1 SRAM)");
  // The aggregate (lifetime) counters alone are no finding: the volatile ones are what counts.
  EXPECT_TRUE(Health({Node("gpu-a", H100Probe(WithField(RecordedQuery(), 0, "ECC Errors/Aggregate",
                                                        "DRAM Uncorrectable", "2")))})
                  .empty());
}

TEST(DoctorHealth, RetiredPagePendingIsAnError) {
  const auto findings =
      Health({Node("gpu-a", H100Probe(WithField(RecordedQuery(), 0, "Retired Pages",
                                                "Pending Page Blacklist", "Yes")))});
  const Finding* f = Only(findings, "gpu-retired-pages");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
}

TEST(DoctorHealth, EccDisabledIsAWarning) {
  std::string q = WithField(RecordedQuery(), 0, "ECC Mode", "Current", "Disabled");
  const auto findings = Health({Node("gpu-a", H100Probe(q))});
  const Finding* f = Only(findings, "gpu-ecc-mode");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->message, "node gpu-a: ECC is disabled on GPU 0 (enabled after the next reset)");
}

TEST(DoctorHealth, PersistenceModeOffIsAWarning) {
  std::string q = HgxQuery();
  for (int g = 0; g < 8; ++g) q = WithField(q, g, "", "Persistence Mode", "Disabled");
  const auto findings = Health({Node("hgx-a", HgxProbe(q))});
  const Finding* f = Only(findings, "gpu-persistence");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->message, "node hgx-a: persistence mode is off on GPUs 0, 1, 2, 3, 4, 5, 6, 7");
}

// A narrower link always warns; a lower generation only while the GPU is busy (an idle GPU
// lowers its link's generation to save power).
TEST(DoctorHealth, PcieLinkBelowMax) {
  const std::string narrow =
      WithField(RecordedQuery(), 0, "PCI/GPU Link Info/Link Width", "Current", "8x");
  auto findings = Health({Node("gpu-a", H100Probe(narrow))});
  const Finding* f = Only(findings, "gpu-pcie");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->message, "node gpu-a: PCIe link below its maximum on GPU 0 (x8 of x16)");
  const std::string gen3 =
      WithField(RecordedQuery(), 0, "PCI/GPU Link Info/PCIe Generation", "Current", "3");
  EXPECT_TRUE(Health({Node("gpu-a", H100Probe(gen3))}).empty()) << "idle: gen 3 is fine";
  const std::string busy = WithField(gen3, 0, "Clocks Event Reasons", "Idle", "Not Active");
  findings = Health({Node("gpu-a", H100Probe(busy))});
  f = Only(findings, "gpu-pcie");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_TRUE(Has(f->message, "gen 3 of 5 while busy")) << f->message;
}

TEST(DoctorHealth, HardwareSlowdown) {
  std::string thermal =
      WithField(RecordedQuery(), 0, "Clocks Event Reasons", "HW Slowdown", "Active");
  thermal = WithField(thermal, 0, "Clocks Event Reasons", "HW Thermal Slowdown", "Active");
  auto findings = Health({Node("gpu-a", H100Probe(thermal))});
  const Finding* f = Only(findings, "gpu-slowdown");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_TRUE(Has(f->message, "GPU 0 (HW Thermal Slowdown)")) << f->message;
  const std::string parent =
      WithField(RecordedQuery(), 0, "Clocks Event Reasons", "HW Slowdown", "Active");
  findings = Health({Node("gpu-a", H100Probe(parent))});
  f = Only(findings, "gpu-slowdown");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
}

TEST(DoctorHealth, ProcessesOrMemoryOnTheGpuWarnWithPids) {
  std::string q = WithLine(RecordedQuery(), 0, "Processes: None",
                           "    Processes\n"
                           "        GPU instance ID                   : N/A\n"
                           "        Compute instance ID               : N/A\n"
                           "        Process ID                        : 4242\n"
                           "            Type                          : C\n"
                           "            Name                          : python3\n"
                           "            Used GPU Memory               : 40960 MiB");
  q = WithField(q, 0, "FB Memory Usage", "Used", "40960 MiB");
  auto findings = Health({Node("gpu-a", H100Probe(q))});
  const Finding* f = Only(findings, "gpu-busy");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->message,
            "node gpu-a: something already runs on GPU 0 (PID 4242 python3, 40960 MiB used)");
  // Memory held by a process nvidia-smi cannot see (another container's) counts too.
  findings = Health({Node(
      "gpu-a", H100Probe(WithField(RecordedQuery(), 0, "FB Memory Usage", "Used", "1024 MiB")))});
  ASSERT_TRUE(Only(findings, "gpu-busy")) << Describe(findings);
}

TEST(DoctorHealth, InactiveNvlinkWhereTopologySaysNvlink) {
  const auto findings =
      Health({Node("hgx-a", HgxProbe(HgxQuery(), NvlinkStatus(8, 18, {{4, 3}})))});
  const Finding* f = Only(findings, "nvlink");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_TRUE(Has(f->message, "GPU 4 (link 3 of 18)")) << f->message;
  // A lone GPU (no NV# peer in topo -m) whose links are all inactive is not a fault.
  const std::string lone =
      RecordedProbeBase(1) +
      GpuProbeLines(1, RecordedQuery(), RecordedTopology(), NvlinkStatus(1, 18, {{0, 0}, {0, 1}})) +
      "probe_end=1\n";
  EXPECT_TRUE(Health({Node("gpu-a", lone)}).empty());
}

TEST(DoctorHealth, FabricManagerWhereThereAreNvswitches) {
  auto findings = Health({Node("hgx-a", HgxProbe(HgxQuery(), NvlinkStatus(), "inactive"))});
  const Finding* f = Only(findings, "fabric-manager");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_TRUE(Has(f->message, "Fabric Manager is inactive")) << f->message;
  const std::string starting = WithField(HgxQuery(), 1, "Fabric", "State", "In Progress");
  findings = Health({Node("hgx-a", HgxProbe(starting))});
  f = Only(findings, "fabric-manager");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_TRUE(Has(f->message, "GPU 1 (In Progress, Success)")) << f->message;
  // No NVSwitch (Fabric State N/A, no /dev/nvidia-nvswitch*): Fabric Manager does not matter.
  EXPECT_TRUE(
      Health({Node("gpu-a", H100Probe(RecordedQuery(), "", "fabricmanager=inactive\n"))}).empty());
}

TEST(DoctorHealth, NvidiaSmiThatDoesNotAnswerIsAnError) {
  std::string probe = RecordedProbeBase(1) + "smi_timeout=10\nkernel_log=dmesg\nprobe_end=1\n";
  const auto findings = Health({Node("gpu-a", probe)});
  const Finding* f = Only(findings, "nvidia-smi");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->message,
            "nvidia-smi did not answer within 10 s on node gpu-a: the driver may be hung");
}

TEST(DoctorHealth, GpuCountAgainstOtherNodesAndTheDriver) {
  const std::string seven = RecordedProbeBase(7) +
                            GpuProbeLines(7, HgxQuery(), HgxTopology(), NvlinkStatus()) +
                            "probe_end=1\n";
  auto findings =
      Health({Node("hgx-a", HgxProbe()), Node("hgx-b", seven), Node("hgx-c", HgxProbe())});
  const Finding* f = Only(findings, "gpu-count");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->message, "node hgx-b has 7 GPUs, others 8");
  // The driver holds 8, nvidia-smi answers for 7.
  const std::string lost = RecordedProbeBase(8) +
                           GpuProbeLines(7, HgxQuery(), HgxTopology(), NvlinkStatus()) +
                           "probe_end=1\n";
  findings = Health({Node("hgx-a", lost)});
  f = Only(findings, "gpu-count");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_TRUE(Has(f->message, "the driver holds 8 GPUs, nvidia-smi answers for 7")) << f->message;
}

TEST(DoctorHealth, FatalXidNamesTheGpuAndWhatItMeans) {
  const std::string xid79 =
      "[ 5012.3] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
      "off the bus.\n";
  const std::string probe = RecordedProbeBase(8) +
                            GpuProbeLines(8, HgxQuery(), HgxTopology(), NvlinkStatus(), xid79) +
                            "probe_end=1\n";
  const auto findings = Health({Node("hgx-a", probe)});
  const Finding* f = Only(findings, "xid");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->message,
            "node hgx-a: Xid 79 on GPU 3 (PCI 0000:5d:00), once this boot: GPU has fallen off "
            "the bus");
  EXPECT_TRUE(Has(f->remedy, "reboot")) << f->remedy;
}

TEST(DoctorHealth, ApplicationXidIsAWarningAndSxidsByTheirKind) {
  const std::string log =
      "[  10.1] NVRM: Xid (PCI:0000:00:06): 13, pid=311, name=python3, Graphics Exception\n"
      "[  10.2] NVRM: Xid (PCI:0000:00:06): 13, pid=311, name=python3, Graphics Exception\n"
      "[  11.0] nvidia-nvswitch3: SXid (PCI:0000:c7:00.0): 24007, Fatal, Link 36 sourcetrack "
      "TCEN0 crumbstore ECC DBE Error\n"
      "[  12.0] nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 12028, Non-fatal, Link 32 egress "
      "non-posted PRIV error\n";
  const auto findings = Health({Node("gpu-a", H100Probe(RecordedQuery(), log))});
  const Finding* xid = Only(findings, "xid");
  ASSERT_TRUE(xid) << Describe(findings);
  EXPECT_EQ(xid->severity, Severity::kWarning);
  EXPECT_TRUE(Has(xid->message, "Xid 13 on GPU 0 (PCI 0000:00:06), 2 times this boot"))
      << xid->message;
  std::vector<Severity> sxids;
  for (const Finding& f : findings) {
    if (f.check == "sxid") sxids.push_back(f.severity);
  }
  EXPECT_EQ(sxids, (std::vector<Severity>{Severity::kError, Severity::kWarning}))
      << Describe(findings);
}

TEST(DoctorHealth, UnreadableKernelLogIsAWarningOnGpuNodesOnly) {
  std::string probe = H100Probe();
  probe.replace(probe.find("kernel_log=dmesg"), 16,
                "kernel_log_error=dmesg: read kernel buffer failed: Operation not permitted");
  auto findings = Health({Node("gpu-a", probe)});
  const Finding* f = Only(findings, "kernel-log");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_TRUE(Has(f->message, "Operation not permitted")) << f->message;
  const std::string cpu = RecordedProbeBase(0) + "kernel_log_error=dmesg: denied\nprobe_end=1\n";
  std::string cpu_only;
  for (const std::string& line : test::SplitLines(cpu)) {
    if (line.rfind("driver_proc=", 0) != 0 && line.rfind("nvidia_smi=", 0) != 0)
      cpu_only += line + "\n";
  }
  EXPECT_TRUE(Health({Node("cpu-a", cpu_only)}).empty());
}

TEST(DoctorHealth, InfinibandPortsRatesAndPeermem) {
  const std::string ndr = "ib_port=mlx5_0/1;4: ACTIVE;5: LinkUp;400 Gb/sec (4X NDR);InfiniBand\n";
  const std::string hdr = "ib_port=mlx5_0/1;4: ACTIVE;5: LinkUp;200 Gb/sec (4X HDR);InfiniBand\n";
  const std::string down = "ib_port=mlx5_1/1;1: DOWN;3: Disabled;10 Gb/sec (4X SDR);InfiniBand\n";
  auto findings =
      Health({Node("gpu-a", H100Probe(RecordedQuery(), "", ndr + "peermem=yes\n")),
              Node("gpu-b", H100Probe(RecordedQuery(), "", ndr + "peermem=yes\n")),
              Node("gpu-c", H100Probe(RecordedQuery(), "", hdr + down + "peermem=no\n"))});
  const Finding* port = Only(findings, "infiniband");
  ASSERT_TRUE(port) << Describe(findings);
  EXPECT_EQ(port->severity, Severity::kError);
  EXPECT_EQ(port->message, "node gpu-c: InfiniBand port not up: mlx5_1/1 (1: DOWN, 3: Disabled)");
  const Finding* rate = Only(findings, "infiniband-rate");
  ASSERT_TRUE(rate) << Describe(findings);
  EXPECT_EQ(rate->severity, Severity::kWarning);
  EXPECT_EQ(rate->message,
            "node gpu-c has InfiniBand at 200 Gb/sec (4X HDR), others 400 Gb/sec (4X NDR)");
  const Finding* peermem = Only(findings, "peermem");
  ASSERT_TRUE(peermem) << Describe(findings);
  EXPECT_EQ(peermem->nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_EQ(peermem->severity, Severity::kWarning);
}

TEST(DoctorHealth, LittleFreeSpaceWhereTheJobWrites) {
  const std::string low =
      "free_space=log dir;5242880;/data;/data/logs\n"
      "free_space=/tmp;524288;/tmp;/tmp\n";
  const auto findings = Health({Node("gpu-a", H100Probe(RecordedQuery(), "", low))});
  std::vector<std::string> messages;
  for (const Finding& f : findings) {
    if (f.check == "disk")
      messages.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
  }
  EXPECT_EQ(messages, (std::vector<std::string>{
                          "warning node gpu-a: 5.0 GiB free on /data (log dir /data/logs)",
                          "error node gpu-a: 512 MiB free on /tmp (/tmp)"}))
      << Describe(findings);
}

TEST(DoctorHealth, SwapIsAWarning) {
  std::string probe = H100Probe();
  probe.replace(probe.find("swap_kib=0"), 10, "swap_kib=8388604");
  const auto findings = Health({Node("gpu-a", probe), Node("gpu-b", H100Probe())});
  const Finding* f = Only(findings, "swap");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->nodes, std::vector<std::string>{"gpu-a"});
}

TEST(DoctorHealth, SlowClocksourceWhereTscIsAvailable) {
  std::string hpet = H100Probe();
  hpet.replace(hpet.find("clocksource=tsc\nclocksources_available=tsc kvm-clock"), 52,
               "clocksource=hpet\nclocksources_available=tsc hpet acpi_pm");
  std::string kvm = H100Probe();
  kvm.replace(kvm.find("clocksource=tsc\n"), 16, "clocksource=kvm-clock\n");
  const auto findings = Health({Node("gpu-a", hpet), Node("gpu-b", kvm)});
  const Finding* f = Only(findings, "clocksource");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->nodes, std::vector<std::string>{"gpu-a"}) << "kvm-clock is as fast as tsc";
}

// A CPU-only node: no nvidia-smi, no driver. No health finding about GPUs.
TEST(DoctorHealth, CpuOnlyNodeHasNoGpuFindings) {
  std::string probe;
  for (const std::string& line : test::SplitLines(RecordedProbeBase(0))) {
    if (line.rfind("driver_proc=", 0) != 0 && line.rfind("nvidia_smi=", 0) != 0)
      probe += line + "\n";
  }
  const NodeFacts n = Node("cpu-a", probe + "probe_end=1\n");
  EXPECT_TRUE(n.gpus.empty());
  EXPECT_TRUE(Health({n, Node("cpu-b", probe + "probe_end=1\n")}).empty());
}

TEST(DoctorHealth, JsonCarriesTheHealthFacts) {
  std::string q = WithField(RecordedQuery(), 0, "Remapped Rows", "Pending", "Yes");
  const std::string probe =
      H100Probe(q, "[ 1.0] NVRM: Xid (PCI:0000:00:06): 48, pid=1, DBE\n",
                "ib_port=mlx5_0/1;4: ACTIVE;5: LinkUp;400 Gb/sec (4X NDR);InfiniBand\n"
                "peermem=yes\n");
  ProbeRun run;
  run.nodes = {Node("gpu-a", probe)};
  ClusterSpec spec;
  spec.nodes.resize(1);
  spec.nodes[0].host = "gpu-a";
  const auto findings = CheckCluster(spec, run);
  const auto doc = nlohmann::json::parse(RenderJsonReport(spec, run, findings));
  const auto& health = doc["nodes"][0]["facts"]["health"];
  ASSERT_EQ(health["gpus"].size(), 1u) << health.dump(2);
  EXPECT_EQ(health["gpus"][0]["remapped_rows_pending"], "Yes");
  EXPECT_EQ(health["gpus"][0]["pcie_width_max"], 16);
  EXPECT_EQ(health["gpus"][0]["nvlink_peers"], 0);
  EXPECT_EQ(health["xids"][0]["code"], 48);
  EXPECT_EQ(health["xids"][0]["gpu"], 0);
  EXPECT_EQ(health["infiniband"][0]["rate"], "400 Gb/sec (4X NDR)");
  EXPECT_EQ(health["nvidia_peermem"], true);
  EXPECT_EQ(health["swap_kib"], 0);
  EXPECT_EQ(health["clocksource"], "tsc");
  EXPECT_EQ(health["free_space"][1]["what"], "/tmp");
  bool remap = false, xid = false;
  for (const auto& f : doc["findings"]) {
    remap = remap || (f["check"] == "gpu-remap" && f["severity"] == "error");
    xid = xid || (f["check"] == "xid" && f["severity"] == "error");
  }
  EXPECT_TRUE(remap && xid) << doc["findings"].dump(2);
}

// --exclude-bad: the healthy nodes, read back by `dtrain launch --hostfile`'s own parser.
TEST(DoctorHealth, ExcludeBadWritesAHostfileLaunchReads) {
  ProbeRun run;
  run.nodes = {
      Node("gpu-a", H100Probe()),
      Node("gpu-b", H100Probe(WithField(RecordedQuery(), 0, "Remapped Rows", "Pending", "Yes"))),
      Node("gpu-c", H100Probe())};
  run.nodes[2].slots = 4;
  run.nodes[2].address = "gpu-c";
  ClusterSpec spec;
  spec.job.command = {"python3", "train.py"};
  for (const NodeFacts& n : run.nodes) {
    NodeSpec s;
    s.host = n.host;
    spec.nodes.push_back(s);
  }
  const HealthyHostfile hostfile = MakeHealthyHostfile(run, CheckCluster(spec, run));
  EXPECT_EQ(hostfile.kept, (std::vector<std::string>{"gpu-a", "gpu-c"}));
  EXPECT_EQ(hostfile.excluded, std::vector<std::string>{"gpu-b"});
  EXPECT_TRUE(Has(hostfile.text, "# excluded gpu-b: node gpu-b: row remapping is pending on GPU 0"))
      << hostfile.text;
  const std::string path = ::testing::TempDir() + "/healthy-hosts";
  EXPECT_TRUE(Has(WriteHealthyHostfile(path, hostfile), "2 of 3 nodes; left out: gpu-b"));
  const std::vector<NodeSpec> nodes = ParseHostfile(path);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].host, run.nodes[0].address);
  EXPECT_EQ(nodes[0].slots, 1);
  EXPECT_EQ(nodes[1].host, "gpu-c");
  EXPECT_EQ(nodes[1].slots, 4);
}

}  // namespace
}  // namespace dtrain
