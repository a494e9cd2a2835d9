// The doctor's health rules on the rest of a node's probe output (tests/support/health_probes.h):
// Xids and SXids in the kernel log, a kernel log it cannot read, InfiniBand ports, their rates
// and nvidia-peermem, swap, memory, the clocksource, a CPU-only node, the cluster file's checks,
// the job's interfaces and the neighbour table. Where the job writes: doctor_health_disk_test.cpp.
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
  run.nodes = {
      Node("gpu-a", probe("health_check=0;0;12;\nhealth_check=1;0;40;ok\n"
                          "health_check=2;0;5;\nhealth_check=3;0;7;\n")),
      Node("gpu-b", probe("health_check=0;1;15;/scratch: not a \x1b[31mmountpoint; see T-12\n"
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
                "error node gpu-b: health check 'scratch' failed (exit 1): /scratch: not a  [31m"
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
  // The nodes the probe did not reach are the reach rule's; the ok line speaks for the others.
  run.nodes[2].reached = false;
  run.nodes[1] = Node("gpu-b", probe("health_check=3;0;9;\n"));
  std::vector<std::string> ok;
  for (const Finding& f : CheckSiteHealthChecks(spec, run.nodes)) {
    EXPECT_EQ(f.message.find("gpu-c"), std::string::npos) << f.message;
    if (f.severity == Severity::kOk) ok.push_back(f.message);
  }
  EXPECT_EQ(ok, std::vector<std::string>{
                    "health check 'fine' passed on 2 of 3 node(s) (slowest 0.01 s, on gpu-b)"});
}

// The interfaces the job's variables name, matched as NCCL matches NCCL_SOCKET_IFNAME (prefixes;
// "^" excludes, "=" exact; only interfaces with an address, IPv6's loopback left out) and Gloo
// GLOO_SOCKET_IFNAME (exact names): missing or down on a node is an error naming what the node
// has; NCCL_IB_HCA matching none of its InfiniBand ports is a warning. Unset variables and a node
// whose interfaces were not read are not judged.
TEST(DoctorHealth, InterfacesTheJobsVariablesName) {
  const std::string interfaces =
      "net_if=eth0;up;10.0.0.5/24,fe80::1/64\nnet_if=hsn0;up;192.168.5.1/24\n"
      "net_if=hsn1;down;192.168.6.1/24\nnet_if=lo;unknown;127.0.0.1/8,::1/128\n"
      "net_if=docker0;down;\nnet_read=1\n";
  auto node = [&](const std::string& host, const std::string& env, const std::string& ifs = "") {
    std::string lines = (ifs.empty() ? interfaces : ifs) + env;
    return Node(host, H100Probe(RecordedQuery(), "", lines));
  };
  auto said = [](const std::vector<NodeFacts>& nodes) {
    std::vector<std::string> out;
    for (const Finding& f : CheckInterfaces(nodes)) {
      if (f.severity != Severity::kOk)
        out.push_back(std::string(SeverityName(f.severity)) + " " + f.message);
    }
    return out;
  };
  using V = std::vector<std::string>;
  // Kept: a prefix, an exact name, an exclusion that leaves eth0 and hsn0 (both up).
  EXPECT_EQ(said({node("a", "net_env=NCCL_SOCKET_IFNAME;eth,hsn0\n"),
                  node("b", "net_env=NCCL_SOCKET_IFNAME;=hsn0\n"),
                  node("c", "net_env=NCCL_SOCKET_IFNAME;^hsn1,lo,docker\n"),
                  node("d", "net_env=NCCL_SOCKET_IFNAME;e\n"),  // one character: NCCL ignores it
                  node("e", "net_env=GLOO_SOCKET_IFNAME;eth0,hsn0\n"),
                  node("f",
                       "net_env=NCCL_SOCKET_IFNAME;=eth0\nnet_env=NCCL_SOCKET_FAMILY;"
                       "AF_INET6\n")}),
            V{})
      << "fe80::1 is an IPv6 address of eth0";
  // When all is well the doctor says so, once, naming the variables it checked.
  const std::vector<Finding> well = CheckInterfaces(
      {node("a", "net_env=NCCL_SOCKET_IFNAME;=hsn0\nnet_env=GLOO_SOCKET_IFNAME;hsn0\n"),
       node("b", "net_env=NCCL_SOCKET_IFNAME;=hsn0\n")});
  ASSERT_EQ(well.size(), 1u);
  EXPECT_EQ(well[0].severity, Severity::kOk);
  EXPECT_EQ(well[0].message,
            "GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME: checked on all 2 node(s), nothing missing or "
            "down");
  std::vector<NodeFacts> one_down = {node("a", "net_env=NCCL_SOCKET_IFNAME;=hsn0\n"),
                                     node("b", "net_env=NCCL_SOCKET_IFNAME;=hsn0\n")};
  one_down[1].reached = false;
  const std::vector<Finding> partly = CheckInterfaces(one_down);
  ASSERT_EQ(partly.size(), 1u);
  EXPECT_EQ(partly[0].message,
            "NCCL_SOCKET_IFNAME: checked on 1 of 2 node(s), nothing missing or down");
  EXPECT_TRUE(CheckInterfaces({node("a", "")}).empty()) << "nothing set, nothing said";
  EXPECT_EQ(
      said({node("a", "net_env=NCCL_SOCKET_IFNAME;ib\n"),
            node("b", "net_env=NCCL_SOCKET_IFNAME;=hsn\n"),
            node("c", "net_env=NCCL_SOCKET_IFNAME;hsn1\n"),
            node("d", "net_env=NCCL_SOCKET_IFNAME;=lo\nnet_env=NCCL_SOCKET_FAMILY;AF_INET6\n"),
            node("e", "net_env=GLOO_SOCKET_IFNAME;eth0,ens5\n"),
            node("f", "net_env=HOROVOD_GLOO_IFACE;hsn1\n"),
            node("g", "net_env=GLOO_SOCKET_IFNAME;docker0\n")}),
      (V{"error node a: NCCL_SOCKET_IFNAME=ib matches none of its interfaces with an address "
         "(eth0, hsn0, hsn1, lo): NCCL stops at init (\"Bootstrap : no socket interface "
         "found\")",
         "error node b: NCCL_SOCKET_IFNAME==hsn matches none of its interfaces with an "
         "address (eth0, hsn0, hsn1, lo): NCCL stops at init (\"Bootstrap : no socket "
         "interface found\")",
         "error node c: NCCL_SOCKET_IFNAME=hsn1 picks hsn1, whose link is down: NCCL's "
         "connections over it fail or hang",
         "error node d: NCCL_SOCKET_IFNAME==lo matches none of its interfaces with an "
         "address (eth0): NCCL stops at init (\"Bootstrap : no socket interface found\")",
         "error node e: GLOO_SOCKET_IFNAME=eth0,ens5: it has no interface ens5 with an "
         "address (it has eth0, hsn0, hsn1, lo): Gloo stops at init (\"Unable to find "
         "address for: ens5\")",
         "error node f: HOROVOD_GLOO_IFACE=hsn1: the link of hsn1 is down: Gloo's "
         "connections over it fail or hang",
         "error node g: GLOO_SOCKET_IFNAME=docker0: it has no interface docker0 with an "
         "address (it has eth0, hsn0, hsn1, lo): Gloo stops at init (\"Unable to find "
         "address for: docker0\")"}));
  // Without `ip` the addresses are unknown: names and links are still judged.
  EXPECT_EQ(said({node("a", "net_env=NCCL_SOCKET_IFNAME;hsn0\n",
                       "net_if=eth0;up;?\nnet_if=hsn0;down;?\nnet_read=1\n")}),
            V{"error node a: NCCL_SOCKET_IFNAME=hsn0 picks hsn0, whose link is down: NCCL's "
              "connections over it fail or hang"});
  // Interfaces not read (an older probe): nothing said.
  EXPECT_EQ(said({node("a", "net_env=NCCL_SOCKET_IFNAME;ib\n", "net_if=eth0;up;10.0.0.5/24\n")}),
            V{});
  // NCCL_IB_HCA: device prefixes and ports, against the ports the node has.
  const std::string ib =
      "ib_port=mlx5_0/1;4: ACTIVE;5: LinkUp;400 Gb/sec (4X NDR);InfiniBand\n"
      "ib_port=mlx5_1/1;4: ACTIVE;5: LinkUp;400 Gb/sec (4X NDR);InfiniBand\n";
  EXPECT_EQ(said({node("a", ib + "net_env=NCCL_IB_HCA;mlx5\n"),
                  node("b", ib + "net_env=NCCL_IB_HCA;=mlx5_1:1\n"),
                  node("c", ib + "net_env=NCCL_IB_HCA;^mlx5_0\n"),
                  node("d", "net_env=NCCL_IB_HCA;mlx5_9\n")}),  // no InfiniBand at all
            V{});
  EXPECT_EQ(said({node("a", ib + "net_env=NCCL_IB_HCA;mlx5_9\n"),
                  node("b", ib + "net_env=NCCL_IB_HCA;=mlx5_0:2\n"),
                  node("c", ib + "net_env=NCCL_IB_HCA;^mlx5\n")}),
            (V{"warning node a: NCCL_IB_HCA=mlx5_9 matches none of its InfiniBand ports (mlx5_0/1, "
               "mlx5_1/1): NCCL finds no InfiniBand device there and runs every collective over "
               "TCP sockets",
               "warning node b: NCCL_IB_HCA==mlx5_0:2 matches none of its InfiniBand ports "
               "(mlx5_0/1, mlx5_1/1): NCCL finds no InfiniBand device there and runs every "
               "collective over TCP sockets",
               "warning node c: NCCL_IB_HCA=^mlx5 matches none of its InfiniBand ports (mlx5_0/1, "
               "mlx5_1/1): NCCL finds no InfiniBand device there and runs every collective over "
               "TCP sockets"}));
}

// The kernel's neighbour table (neigh_table=FAMILY;ENTRIES;FULLS;GC_THRESH1;2;3 from the probe):
// full now is an error (the node cannot resolve a new peer); full at some time since boot, a
// warning (saying when it is past its soft limit now); never full, nothing.
TEST(DoctorHealth, ANeighbourTableFullNowIsAnErrorAndOneFullSinceBootAWarning) {
  const auto with = [](const std::string& lines) { return H100Probe(RecordedQuery(), "", lines); };
  const auto findings = Health({Node("gpu-a", with("neigh_table=IPv4;1024;1063;128;512;1024\n")),
                                Node("gpu-b", with("neigh_table=IPv4;904;7;128;512;1024\n")),
                                Node("gpu-c", with("neigh_table=IPv4;11;1063;128;512;1024\n"
                                                   "neigh_table=IPv6;21;0;128;512;1024\n")),
                                Node("gpu-d", with("neigh_table=IPv4;600;0;128;512;1024\n"
                                                   "neigh_table=IPv6;2048;0;256;1024;2048\n")),
                                Node("gpu-e", with("neigh_table=IPv4;11;0;128;512;1024\n"))});
  std::vector<const Finding*> found;
  for (const Finding& f : findings) {
    if (f.check == "neighbour-table") found.push_back(&f);
  }
  ASSERT_EQ(found.size(), 4u) << Describe(findings);
  EXPECT_EQ(found[0]->nodes, std::vector<std::string>{"gpu-a"});
  EXPECT_EQ(found[0]->severity, Severity::kError);
  EXPECT_EQ(found[0]->message,
            "node gpu-a: its IPv4 neighbour (ARP) table is full: 1024 entries now, limits "
            "net.ipv4.neigh.default.gc_thresh2 512 and gc_thresh3 1024; it was full 1063 times "
            "since boot (\"neighbor table overflow!\" in the kernel log); an address it has not "
            "resolved lately cannot be, and a connection to it times out (NCCL's and Gloo's "
            "init, the peer test)");
  EXPECT_TRUE(Has(found[0]->remedy,
                  "sysctl -w net.ipv4.neigh.default.gc_thresh1=512 "
                  "net.ipv4.neigh.default.gc_thresh2=2048 net.ipv4.neigh.default.gc_thresh3=4096"))
      << found[0]->remedy;
  // Full since boot and past its soft limit now: a warning that says so, not a quarantine.
  EXPECT_EQ(found[1]->nodes, std::vector<std::string>{"gpu-b"});
  EXPECT_EQ(found[1]->severity, Severity::kWarning);
  EXPECT_TRUE(Has(found[1]->message, "was full 7 times since boot")) << found[1]->message;
  EXPECT_TRUE(Has(found[1]->message, "904 entries now")) << found[1]->message;
  EXPECT_TRUE(Has(found[1]->message, "past the soft limit")) << found[1]->message;
  EXPECT_EQ(found[2]->nodes, std::vector<std::string>{"gpu-c"});
  EXPECT_EQ(found[2]->severity, Severity::kWarning);
  EXPECT_TRUE(Has(found[2]->message, "IPv4 neighbour (ARP) table was full 1063 times since boot"))
      << found[2]->message;
  EXPECT_FALSE(Has(found[2]->message, "past the soft limit")) << found[2]->message;
  // Full now without an overflow counted yet (IPv6, its own limits): an error all the same.
  EXPECT_EQ(found[3]->nodes, std::vector<std::string>{"gpu-d"});
  EXPECT_EQ(found[3]->severity, Severity::kError);
  EXPECT_TRUE(Has(found[3]->message, "IPv6 neighbour (NDISC) table is full: 2048 entries now"))
      << found[3]->message;
  EXPECT_FALSE(Has(found[3]->message, "since boot")) << found[3]->message;
  EXPECT_TRUE(Has(found[3]->remedy, "net.ipv6.neigh.default.gc_thresh3=8192")) << found[3]->remedy;
}

}  // namespace
}  // namespace dtrain
