// Probe outputs of GPU nodes for the doctor's health-rule tests, and the findings the rules make
// of them: the probe's output recorded on a real H100 node (tests/fixtures/h100-node/probe.txt)
// with its GPU lines rebuilt from nvidia_smi_fixture.h (one H100, or an 8-GPU HGX H100 node),
// the NodeFacts the doctor reads from such an output, and CheckCluster's health findings that
// are not ok.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "doctor/checks.h"
#include "doctor/node_facts.h"
#include "doctor/probe_runner.h"
#include "launcher/cluster_spec.h"
#include "tests/support/nvidia_smi_fixture.h"

namespace dtrain::test {

// The health rules' checks: Health() keeps their findings and leaves the others' out.
inline const std::set<std::string> kHealthChecks = {
    "nvidia-smi",   "gpu-count",       "gpu-ecc",      "gpu-remap",    "gpu-retired-pages",
    "gpu-ecc-mode", "gpu-persistence", "gpu-pcie",     "gpu-slowdown", "gpu-busy",
    "nvlink",       "fabric-manager",  "xid",          "sxid",         "kernel-log",
    "infiniband",   "infiniband-rate", "peermem",      "disk",         "disk-write",
    "swap",         "memory",          "clocksource",  "gpu-mig",      "memlock",
    "host-errors",  "pci-acs",         "iommu",        "gpu-recovery", "interface",
    "gpu-power",    "neighbour-table", "shm-leftovers"};

// The probe's output recorded on the H100 node (tests/fixtures/h100-node/probe.txt) without its
// GPU lines, plus a healthy host's health lines.
inline std::string RecordedProbeBase(int gpus_in_driver) {
  std::string out;
  for (const std::string& line : SplitLines(FixtureText("probe.txt"))) {
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
inline std::string H100Probe(const std::string& query = RecordedQuery(),
                             const std::string& kernel = "", const std::string& extra = "") {
  return RecordedProbeBase(1) + GpuProbeLines(1, query, RecordedTopology(), "", kernel) + extra +
         "probe_end=1\n";
}

// One HGX H100 node with 8 GPUs.
inline std::string HgxProbe(const std::string& query = HgxQuery(),
                            const std::string& nvlink = NvlinkStatus(),
                            const std::string& fabric_manager = "active") {
  return RecordedProbeBase(8) + GpuProbeLines(8, query, HgxTopology(), nvlink, "", fabric_manager) +
         "probe_end=1\n";
}

// The facts the doctor reads from `probe` on node `host` (address 10.0.0.<length of host>, one
// slot).
inline NodeFacts Node(const std::string& host, const std::string& probe) {
  NodeFacts n;
  n.host = host;
  n.address = "10.0.0." + std::to_string(host.size());
  n.slots = 1;
  ApplyProbeLines(SplitProbeOutput(probe), -1, n);
  return n;
}

// CheckCluster's findings on `nodes` from the health rules, those that are not ok.
inline std::vector<Finding> Health(const std::vector<NodeFacts>& nodes) {
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

// One line per finding ("error [gpu-remap] node gpu-a: ..."), for failure messages.
inline std::string Describe(const std::vector<Finding>& findings) {
  std::string out;
  for (const Finding& f : findings) {
    out += std::string(SeverityName(f.severity)) + " [" + f.check + "] " + f.message + "\n";
  }
  return out;
}

// The one finding of `check`, or a failure.
inline const Finding* Only(const std::vector<Finding>& findings, const std::string& check) {
  const Finding* found = nullptr;
  for (const Finding& f : findings) {
    if (f.check != check) continue;
    if (found) return nullptr;
    found = &f;
  }
  return found;
}

// Whether `part` occurs in `text`.
inline bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace dtrain::test
