// The host's hardware errors in a node's kernel log (doctor/host_error_events.h): a log with a line
// of each kind, in the wordings the kernel prints (older and newer kernels'), and lines that look
// alike but are not errors of the node's hardware. The probe itself (templates/probe.sh) reads it
// from a dmesg stand-in, so its filter is tested with the parser and the rule.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/host_error_events.h"
#include "tests/support/files.h"
#include "tests/support/health_probes.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using test::Describe;
using test::H100Probe;
using test::Health;
using test::Node;

// Lines of a node's kernel log, stamped as dmesg prints them.
const char* kKernelLog =
    R"([    2.318012] EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0: DEV 0000:3a:0a.0 (INTERRUPT)
[    3.120331] nvme nvme0: pci function 0000:c1:00.0
[    3.402211] XFS (nvme0n1p1): Mounting V5 Filesystem
[  812.004455] EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3c1d55 offset:0x840 grain:32 syndrome:0x0 - err_code:0x0000:0x009f socket:0 imc:0 rank:0 bg:1 ba:2 row:0x1f2a col:0x3e8)
[  901.117820] EDAC MC0: 2 CE memory read error on CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x3c1d56 offset:0x0 grain:32 syndrome:0x0 - err_code:0x0000:0x009f socket:0 imc:0 rank:0 bg:1 ba:2 row:0x1f2b col:0x0)
[ 6021.114233] EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#2_DIMM#0 (channel:2 slot:0 page:0x5a3f12 offset:0x0 grain:32 - err_code:0x0000:0x009f socket:1 imc:0 rank:0 bg:0 ba:3 row:0x2d1f col:0x0)
[ 6021.114301] Memory failure: 0x5a3f12: recovery action for dirty LRU page: Recovered
[ 7001.000001] mce: [Hardware Error]: Machine check events logged
[ 7102.551230] pcieport 0000:5c:02.0: AER: Multiple Uncorrected (Fatal) error message received from 0000:5d:00.0
[ 7102.551301] nvidia 0000:5d:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)
[ 7102.551320] nvidia 0000:5d:00.0:   device [10de:2330] error status/mask=00040000/00000000
[ 7200.120011] mlx5_core 0000:1a:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
[ 7201.120011] mlx5_core 0000:1a:00.0: PCIe Bus Error: severity=Correctable, type=Data Link Layer, (Transmitter ID)
[ 7300.443100] pcieport 0000:00:03.1: PCIe Bus Error: severity=Uncorrectable (Non-Fatal), type=Transaction Layer, (Requester ID)
[ 7400.000100] blk_update_request: I/O error, dev sdb, sector 123456 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0
[ 7400.000200] critical medium error, dev sdb, sector 123460 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 2
[ 7401.000100] I/O error, dev loop3, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2
[ 7402.000100] Buffer I/O error on dev sr0, logical block 0, async page read
[ 7500.000100] nvme nvme1: I/O 873 QID 12 timeout, aborting
[ 7530.000100] nvme nvme1: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff
[ 7600.000100] EXT4-fs error (device nvme1n1p1): ext4_find_entry:1455: inode #2: comm python: reading directory lblock 0
[ 7600.000200] EXT4-fs (nvme1n1p1): Remounting filesystem read-only
[ 7601.000100] EXT4-fs error (device loop2): ext4_journal_check_start:83: comm dd: Detected aborted journal
[ 7700.000100] INFO: task jbd2/nvme1n1p1-:712 blocked for more than 122 seconds.
[ 7700.000200] INFO: task python:40231 blocked for more than 122 seconds.
[ 7800.000100] watchdog: BUG: soft lockup - CPU#17 stuck for 23s! [kworker/17:1:1234]
[ 7900.000100] CPU12: Core temperature above threshold, cpu clock throttled (total events = 1)
[ 7900.000200] CPU12: Package temperature above threshold, cpu clock throttled (total events = 1)
)";

// What the probe prints with `kernel` as the kernel log: templates/probe.sh run as the doctor runs
// it (sh -s), with a dmesg stand-in first on its PATH and the parts that do not read the kernel
// log left out; `sysfs`, when given, is read as /sys.
std::string ProbeWithKernelLog(const std::string& kernel, const std::string& sysfs = "") {
  const std::string bin = testing::ScratchDirs::Make("host-errors-bin");
  testing::WriteFile(bin + "/dmesg.txt", kernel);
  testing::WriteFile(bin + "/dmesg", "#!/bin/sh\ncat \"$(dirname \"$0\")/dmesg.txt\"\n");
  std::filesystem::permissions(bin + "/dmesg", std::filesystem::perms::owner_all);
  const std::string command = "env -i PATH=" + bin + ":/usr/bin:/bin HOME=/ " +
                              (sysfs.empty() ? "" : "DTRAIN_PROBE_SYSFS=" + sysfs + " ") +
                              "DTRAIN_PROBE_SKIP='python torch horovod py_spy "
                              "clip rdzv nccl_lib gpu_health pci disk_write' sh -s < " +
                              std::string(DTRAIN_SOURCE_DIR) + "/templates/probe.sh";
  std::string out;
  FILE* probe = ::popen(command.c_str(), "r");
  if (!probe) return out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, probe)) > 0;) out.append(buffer, n);
  ::pclose(probe);
  return out;
}

// The host-errors findings of a node whose probe printed `probe_lines`, as "severity message".
std::vector<std::string> HostErrorFindings(const std::string& probe_lines) {
  std::vector<std::string> out;
  for (const Finding& f :
       Health({Node("gpu-a", H100Probe(test::RecordedQuery(), "", probe_lines))}))
    if (f.check == "host-errors")
      out.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
  return out;
}

// The probe sends each error line (and none of the look-alikes), and the doctor makes one finding
// per kind and subject: errors for an uncorrected memory error and a fatal PCIe error, warnings for
// the rest.
TEST(DoctorHostErrors, EachKindOfTheKernelsWordingsIsNamed) {
  const std::string probe = ProbeWithKernelLog(kKernelLog);
  ASSERT_NE(probe.find("\nkernel_log=dmesg\n"), std::string::npos) << probe;
  // The 20 error lines, not the loop device's, the optical drive's, the AER lines around the
  // fatal error's nor the benign ones.
  EXPECT_NE(probe.find("\nhost_error_lines_total=20\n"), std::string::npos) << probe;
  std::string sent;
  for (const std::string& line : test::SplitLines(probe)) {
    if (line.rfind("host_error_line=", 0) == 0) sent += line.substr(16) + "\n";
  }
  EXPECT_EQ(sent.find("loop"), std::string::npos) << sent;
  EXPECT_EQ(sent.find("Giving out device"), std::string::npos) << sent;
  EXPECT_EQ(sent.find("Mounting V5"), std::string::npos) << sent;
  // The worst first: they are kept when the log holds more lines than the probe sends.
  EXPECT_EQ(sent.rfind("[ 6021.114233] EDAC MC1: 1 UE", 0), 0u) << sent;

  const NodeFacts facts = Node("gpu-a", probe);
  EXPECT_EQ(facts.health.host_error_lines_total, 20);
  EXPECT_EQ(facts.health.host_error_lines_sent, 20);
  std::vector<std::string> events;
  for (const HostErrorEvent& e : facts.health.host_errors) {
    events.push_back(std::string(HostErrorKindName(e.kind)) + " [" + e.subject + "] " +
                     std::to_string(e.count));
  }
  EXPECT_EQ(events, (std::vector<std::string>{
                        "memory-uncorrected [EDAC MC1, CPU_SrcID#1_MC#0_Chan#2_DIMM#0] 1",
                        "memory-uncorrected [] 1",
                        "pcie-fatal [0000:5d:00.0] 1",
                        "memory-corrected [EDAC MC0, CPU_SrcID#0_MC#0_Chan#1_DIMM#0] 3",
                        "machine-check [] 1",
                        "pcie-corrected [0000:1a:00.0] 2",
                        "pcie-non-fatal [0000:00:03.1] 1",
                        "drive-io [sdb] 2",
                        "nvme [nvme1] 2",
                        "file-system [nvme1n1p1] 2",
                        "hung-task [] 2",
                        "lockup [] 1",
                        "thermal [] 2",
                    }));

  const std::vector<NodeFacts> nodes = {facts};
  const auto findings = Health(nodes);
  std::vector<std::string> errors, warnings;
  for (const Finding& f : findings) {
    if (f.check != "host-errors") continue;
    (f.severity == Severity::kError ? errors : warnings).push_back(f.message);
    EXPECT_EQ(f.nodes, std::vector<std::string>{"gpu-a"});
  }
  ASSERT_EQ(errors.size(), 3u) << Describe(findings);
  EXPECT_EQ(errors[0],
            "node gpu-a: 1 uncorrected memory error(s) (EDAC MC1, CPU_SrcID#1_MC#0_Chan#2_DIMM#0) "
            "this boot: EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#2_DIMM#0 "
            "(channel:2 slot:0 page:0x5a3f12 offset:0x0 grain:32 - err_code:0x0000:0x009f "
            "socket:1 imc:0 rank:0 bg:0 ba:3 row:0x2d1f col:0x0)");
  EXPECT_EQ(errors[1],
            "node gpu-a: 1 uncorrected memory error(s) this boot: Memory failure: 0x5a3f12: "
            "recovery action for dirty LRU page: Recovered");
  EXPECT_EQ(errors[2],
            "node gpu-a: 1 fatal uncorrected PCIe error(s) on 0000:5d:00.0 this boot: nvidia "
            "0000:5d:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, "
            "(Receiver ID)");
  ASSERT_EQ(warnings.size(), 10u) << Describe(findings);
  EXPECT_EQ(warnings[0].rfind("node gpu-a: 3 corrected memory error(s) (EDAC MC0, "
                              "CPU_SrcID#0_MC#0_Chan#1_DIMM#0) this boot: EDAC MC0: 1 CE",
                              0),
            0u)
      << warnings[0];
  EXPECT_EQ(warnings[5].rfind("node gpu-a: 2 NVMe command timeout(s) or controller reset(s) on "
                              "nvme1 this boot: nvme nvme1: I/O 873 QID 12 timeout, aborting",
                              0),
            0u)
      << warnings[5];
  EXPECT_EQ(warnings[7],
            "node gpu-a: 2 task(s) blocked in the kernel past the hung-task limit this boot: "
            "INFO: task jbd2/nvme1n1p1-:712 blocked for more than 122 seconds.");
}

// A clean log has no finding; a log with more error lines than the probe sends says so apart, and
// the counts are of the lines sent.
TEST(DoctorHostErrors, ACleanLogHasNoneAndACutOneSaysSo) {
  EXPECT_EQ(HostErrorFindings("kernel_log=dmesg\nhost_error_lines_total=0\n"),
            std::vector<std::string>{});
  std::string flood = "kernel_log=dmesg\nhost_error_lines_total=5000\n";
  for (int i = 0; i < 200; ++i) {
    flood += "host_error_line=[ " + std::to_string(100 + i) +
             ".000001] mlx5_core 0000:1a:00.0: PCIe Bus Error: severity=Corrected, type=Physical "
             "Layer, (Receiver ID)\n";
  }
  const std::vector<std::string> findings = HostErrorFindings(flood);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].rfind(
                "warning node gpu-a: 200 corrected PCIe error(s) on 0000:1a:00.0 this boot: ", 0),
            0u)
      << findings[0];
  EXPECT_EQ(findings[1],
            "warning node gpu-a: the kernel log holds 5000 lines of hardware errors this boot, of "
            "which the probe sent 200 (the uncorrected first): the counts above are of those");
}

// EDAC's counters (a sysfs tree as the kernel lays it out: mc/mcN/{ce,ue}_count and each DIMM's
// dimm_{ce,ue}_count and dimm_label) are the record where a node has them: a DIMM with an
// uncorrected error is an error, corrected ones a warning, errors no DIMM was named for are the
// controller's; the kernel log's EDAC lines are then not counted again (its "Memory failure" line
// still is).
TEST(DoctorHostErrors, EdacCountersAreTheRecordOfMemoryErrors) {
  const std::string sys = testing::ScratchDirs::Make("host-errors-sys");
  auto write = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(sys + path).parent_path());
    testing::WriteFile(sys + path, text + "\n");
  };
  const std::string mc0 = "/devices/system/edac/mc/mc0", mc1 = "/devices/system/edac/mc/mc1";
  write(mc0 + "/ce_count", "3");
  write(mc0 + "/ue_count", "0");
  write(mc0 + "/dimm0/dimm_ce_count", "0");
  write(mc0 + "/dimm0/dimm_ue_count", "0");
  write(mc0 + "/dimm0/dimm_label", "CPU_SrcID#0_MC#0_Chan#0_DIMM#0");
  write(mc0 + "/dimm3/dimm_ce_count", "3");
  write(mc0 + "/dimm3/dimm_ue_count", "0");
  write(mc0 + "/dimm3/dimm_label", "CPU_SrcID#0_MC#0_Chan#1_DIMM#0");
  write(mc1 + "/ce_count", "0");
  write(mc1 + "/ue_count", "2");
  write(mc1 + "/dimm4/dimm_ce_count", "0");
  write(mc1 + "/dimm4/dimm_ue_count", "1");
  write(mc1 + "/dimm4/dimm_label", "CPU_SrcID#1_MC#0_Chan#2_DIMM#0");
  const std::string probe = ProbeWithKernelLog(kKernelLog, sys);
  EXPECT_NE(probe.find("\nedac_mc=mc0;3;0\n"), std::string::npos) << probe;
  EXPECT_NE(probe.find("\nedac_dimm=mc0;dimm3;3;0;CPU_SrcID#0_MC#0_Chan#1_DIMM#0\n"),
            std::string::npos)
      << probe;
  EXPECT_EQ(probe.find("dimm0"), std::string::npos) << "no error, not sent: " << probe;
  std::vector<std::string> memory;
  for (const Finding& f : Health({Node("gpu-a", probe)})) {
    if (f.check == "host-errors" && f.message.find("memory error") != std::string::npos)
      memory.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
  }
  EXPECT_EQ(memory,
            (std::vector<std::string>{
                "error node gpu-a: 1 uncorrected memory error(s) this boot: Memory failure: "
                "0x5a3f12: recovery action for dirty LRU page: Recovered",
                "warning node gpu-a: 3 corrected memory error(s) on DIMM "
                "CPU_SrcID#0_MC#0_Chan#1_DIMM#0 (mc0/dimm3) since boot (EDAC's counters)",
                "error node gpu-a: 1 uncorrected memory error(s) on DIMM "
                "CPU_SrcID#1_MC#0_Chan#2_DIMM#0 (mc1/dimm4) since boot (EDAC's counters)",
                "error node gpu-a: 1 uncorrected memory error(s) on memory controller mc1 (no "
                "DIMM named) since boot (EDAC's counters)"}));
}

}  // namespace
}  // namespace dtrain
