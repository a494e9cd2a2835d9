// The doctor's health rules on the rest of a node's probe output (tests/support/health_probes.h):
// Xids and SXids in the kernel log, a kernel log it cannot read, InfiniBand ports, their rates
// and nvidia-peermem, free disk space where the job writes, swap, the clocksource, and a
// CPU-only node.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/checks.h"
#include "tests/support/health_probes.h"

namespace dtrain {
namespace {

using test::Describe;
using test::GpuProbeLines;
using test::H100Probe;
using test::Has;
using test::Health;
using test::HgxQuery;
using test::HgxTopology;
using test::Node;
using test::NvlinkStatus;
using test::Only;
using test::RecordedProbeBase;
using test::RecordedQuery;
using test::SplitLines;

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
  for (const std::string& line : SplitLines(cpu)) {
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

// 4% less memory than the best-equipped node (a 4 GiB module of 128 GiB gone) is a warning on that
// node; 1% less (reservations) and the same are not.
TEST(DoctorHealth, NodeWithLessMemoryThanTheOthersIsAWarning) {
  auto with_mem = [](long long kib) {
    std::string probe = H100Probe();
    probe.replace(probe.find("mem_kib=131981020"), 17, "mem_kib=" + std::to_string(kib));
    return probe;
  };
  const auto findings = Health({Node("gpu-a", H100Probe()), Node("gpu-b", with_mem(126700000)),
                                Node("gpu-c", with_mem(130700000))});
  const Finding* f = Only(findings, "memory");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_EQ(f->message, "node gpu-b: 120.8 GiB of memory, 4% less than node gpu-a (125.9 GiB)");
  EXPECT_EQ(Only(Health({Node("gpu-a", H100Probe()), Node("gpu-b", H100Probe())}), "memory"),
            nullptr);
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
  for (const std::string& line : SplitLines(RecordedProbeBase(0))) {
    if (line.rfind("driver_proc=", 0) != 0 && line.rfind("nvidia_smi=", 0) != 0)
      probe += line + "\n";
  }
  const NodeFacts n = Node("cpu-a", probe + "probe_end=1\n");
  EXPECT_TRUE(n.gpus.empty());
  EXPECT_TRUE(Health({n, Node("cpu-b", probe + "probe_end=1\n")}).empty());
}

// The cluster file's own health checks, from the probe's health_check= lines: a failure names the
// exit status and the last line (which may hold ';'), a run past the limit is a timeout, a node
// whose probe printed nothing for a check (or a malformed line) gave no answer; all passing is
// one ok finding. Checks of severity warning warn, and are not judged where they were not run.
TEST(DoctorHealth, SiteHealthChecksFromTheProbesLines) {
  ClusterSpec spec = ParseClusterText(
      "nodes: [{host: gpu-a}, {host: gpu-b}, {host: gpu-c}]\nhealth_checks:\n"
      "  - {name: scratch, run: mountpoint -q /scratch, fix: mount /scratch}\n"
      "  - {name: nfs, run: stat /home, timeout: 3}\n"
      "  - {name: bios, run: exit 1, severity: warning}\n"
      "  - {name: fine, run: 'true'}\n",
      "x");
  const std::string base = H100Probe();
  auto probe = [&](const std::string& lines) {
    std::string p = base;
    p.insert(p.find("probe_end=1"), lines);
    return p;
  };
  ProbeRun run;
  run.nodes = {Node("gpu-a", probe("health_check=0;0;12;\nhealth_check=1;0;40;ok\n"
                                   "health_check=2;0;5;\nhealth_check=3;0;7;\n")),
               Node("gpu-b", probe("health_check=0;1;15;/scratch: not a mountpoint; see T-12\n"
                                   "health_check=1;124;3004;stat-ing\nhealth_check=2;1;5;2.0\n"
                                   "health_check=3;0;9;\n")),
               Node("gpu-c", probe("health_check=0;;15;no status\nhealth_check=1;0;50;\n"
                                   "health_check=2;0;5;\nhealth_check=3;0;130;\n"))};
  std::vector<Finding> findings = CheckSiteHealthChecks(spec, run.nodes);
  std::vector<std::string> said;
  for (const Finding& f : findings) {
    said.push_back(std::string(SeverityName(f.severity)) + " " + f.message + " -> " + f.remedy);
  }
  EXPECT_EQ(said,
            (std::vector<std::string>{
                "error node gpu-b: health check 'scratch' failed (exit 1): /scratch: not a "
                "mountpoint; see T-12 -> mount /scratch",
                "error node gpu-c: health check 'scratch' gave no answer (the probe ended without "
                "it) -> mount /scratch",
                "error node gpu-b: health check 'nfs' did not end in 3 s; its last line: stat-ing "
                "-> run it on gpu-b to see why: stat /home",
                "warning node gpu-b: health check 'bios' failed (exit 1): 2.0 -> run it on gpu-b "
                "to see why: exit 1",
                "ok health check 'fine' passed on all 3 node(s) (slowest 0.13 s, on gpu-c) -> "}));
  EXPECT_EQ(ErrorsByNode(findings).size(), 2u) << "gpu-b and gpu-c are unfit, gpu-a is not";
  // A command that exits 124 on its own, quickly, failed; it did not time out.
  run.nodes[1] = Node("gpu-b", probe("health_check=1;124;20;\n"));
  findings = CheckSiteHealthChecks(spec, run.nodes, /*warning_checks=*/false);
  said.clear();
  for (const Finding& f : findings) {
    if (f.nodes == std::vector<std::string>{"gpu-b"}) said.push_back(f.message);
  }
  EXPECT_EQ(said, (std::vector<std::string>{
                      "node gpu-b: health check 'scratch' gave no answer (the probe ended without "
                      "it)",
                      "node gpu-b: health check 'nfs' failed (exit 124)",
                      "node gpu-b: health check 'fine' gave no answer (the probe ended without "
                      "it)"}))
      << "bios, a warning, was not run and is not judged";
  // The nodes the probe did not reach are the reach rule's.
  run.nodes[2].reached = false;
  for (const Finding& f : CheckSiteHealthChecks(spec, run.nodes)) {
    EXPECT_EQ(f.message.find("gpu-c"), std::string::npos) << f.message;
  }
}

}  // namespace
}  // namespace dtrain
