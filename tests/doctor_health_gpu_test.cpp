// The doctor's GPU health rules on nvidia-smi outputs recorded on a real H100 (the healthy case)
// and on variants of them with one fault each (tests/support/nvidia_smi_fixture.h), and on an
// 8-GPU HGX H100 node built from the same formats: the parse of `nvidia-smi -q`, ECC, row
// remapping, retired pages, persistence, PCIe, slowdowns, busy GPUs, NVLink, Fabric Manager, an
// nvidia-smi that does not answer and the GPU count.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/checks.h"
#include "doctor/nvidia_smi_report.h"
#include "tests/support/health_probes.h"

namespace dtrain {
namespace {

using test::Describe;
using test::GpuProbeLines;
using test::H100Probe;
using test::Has;
using test::Health;
using test::HgxProbe;
using test::HgxQuery;
using test::HgxTopology;
using test::Node;
using test::NvlinkStatus;
using test::Only;
using test::RecordedProbeBase;
using test::RecordedQuery;
using test::RecordedTopology;
using test::WithField;
using test::WithLine;

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

// The driver's own verdict after a fault (NVML's GPU recovery action, "None" on the recorded H100):
// any other action is an error naming the GPUs and what each needs.
TEST(DoctorHealth, RecoveryActionTheDriverAsksForIsAnError) {
  EXPECT_EQ(ParseNvidiaSmiQuery(RecordedQuery()).gpus[0].recovery_action, "None");
  std::string q = WithField(HgxQuery(), 3, "", "GPU Recovery Action", "Reset");
  q = WithField(q, 5, "", "GPU Recovery Action", "Drain P2P");
  const auto findings = Health({Node("hgx-a", HgxProbe(q))});
  const Finding* f = Only(findings, "gpu-recovery");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kError);
  EXPECT_EQ(f->message,
            "node hgx-a: the driver asks for a recovery action on GPU 3 (Reset), GPU 5 (Drain "
            "P2P)");
  EXPECT_TRUE(Has(f->remedy, "nvidia-smi -r -i N")) << f->remedy;
  // N/A (a driver without the field filled in) is not a fault.
  EXPECT_TRUE(
      Health({Node("hgx-a", HgxProbe(WithField(HgxQuery(), 0, "", "GPU Recovery Action", "N/A")))})
          .empty());
}

// MIG on is an error (a process sees one instance; instances have no peer-to-peer path); turning
// on at the next reset, a warning; turning off at the next reset is said beside the error.
TEST(DoctorHealth, MigModeOnIsAnErrorAndPendingOnAWarning) {
  std::string q = WithField(HgxQuery(), 1, "MIG Mode", "Current", "Enabled");
  q = WithField(q, 1, "MIG Mode", "Pending", "Enabled");
  q = WithField(q, 4, "MIG Mode", "Current", "Enabled");
  q = WithField(q, 6, "MIG Mode", "Pending", "Enabled");
  const auto findings = Health({Node("hgx-a", HgxProbe(q))});
  std::vector<const Finding*> mig;
  for (const Finding& f : findings) {
    if (f.check == "gpu-mig") mig.push_back(&f);
  }
  ASSERT_EQ(mig.size(), 2u) << Describe(findings);
  EXPECT_EQ(mig[0]->severity, Severity::kError);
  EXPECT_EQ(mig[0]->message,
            "node hgx-a: MIG mode is on for GPU 1, GPU 4 (disabled after the next reset): a "
            "process sees one MIG instance, not the whole GPU, and MIG instances have no "
            "peer-to-peer path to each other");
  EXPECT_TRUE(Has(mig[0]->remedy, "nvidia-smi -i N -mig 0")) << mig[0]->remedy;
  EXPECT_EQ(mig[1]->severity, Severity::kWarning);
  EXPECT_EQ(mig[1]->message, "node hgx-a: MIG mode turns on at the next reset of GPU 6");
  EXPECT_EQ(Only(findings, "gpu-mig"), nullptr) << "two findings";
  EXPECT_TRUE(Health({Node("hgx-a", HgxProbe())}).empty()) << "MIG Disabled, Pending Disabled";
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

// A GPU held below its board's defaults (a power limit set with nvidia-smi -pl or a BMC's cap,
// application clocks set with -ac) runs slower under load than its peers: a warning naming both.
// The recorded H100 runs at its defaults (700 W of 700 W, 1980 of 1980 MHz).
TEST(DoctorHealth, PowerLimitOrApplicationClocksBelowTheDefaults) {
  std::string capped =
      WithField(RecordedQuery(), 0, "GPU Power Readings", "Current Power Limit", "400.00 W");
  capped = WithField(capped, 0, "Applications Clocks", "Graphics", "1410 MHz");
  auto findings = Health({Node("gpu-a", H100Probe(capped)), Node("gpu-b", H100Probe())});
  const Finding* f = Only(findings, "gpu-power");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->nodes, std::vector<std::string>{"gpu-a"});
  EXPECT_EQ(f->message,
            "node gpu-a: held below its defaults: GPU 0 (power limit 400 W of its default 700 W, "
            "application clocks 1410 of 1980 MHz)");
  // A driver before 535 names the section "Power Readings" and the limit "Power Limit".
  std::string old_driver = RecordedQuery();
  old_driver.replace(old_driver.find("    GPU Power Readings"), 22, "    Power Readings");
  old_driver = WithField(old_driver, 0, "Power Readings", "Current Power Limit", "650.00 W");
  old_driver.replace(old_driver.find("Current Power Limit"), 19, "Power Limit        ");
  findings = Health({Node("gpu-a", H100Probe(old_driver))});
  f = Only(findings, "gpu-power");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->message, "node gpu-a: held below its defaults: GPU 0 (power limit 650 W of its "
                        "default 700 W)");
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

}  // namespace
}  // namespace dtrain
