// Draining the Slurm nodes the doctor found unfit (slurm_drain.h).
#include "doctor/slurm_drain.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "doctor/fast_health_check.h"
#include "launcher/slurm/slurm_child.h"

namespace dtrain {

namespace {

constexpr int kScontrolTimeoutMs = 30000;

// "BY: WHY" on one line, cut to kMaxDrainReason bytes, at a character's start.
std::string Reason(const std::string& by, const std::string& why) {
  std::string reason = by + ": " + why;
  std::replace_if(
      reason.begin(), reason.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; },
      ' ');
  if (reason.size() <= kMaxDrainReason) return reason;
  size_t cut = kMaxDrainReason - 3;
  while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) --cut;
  return reason.substr(0, cut) + "...";
}

}  // namespace

std::map<std::string, std::string> UnfitToDrain(const ClusterSpec& placed, const ProbeRun& run,
                                                const std::vector<Finding>& compute) {
  std::vector<Finding> findings = NodeFitnessFindings(placed, run, /*count_unreached=*/true);
  findings.insert(findings.end(), compute.begin(), compute.end());
  // A finding that names several nodes (a pair that cannot connect, two nodes with one address)
  // cannot be blamed on one of them: it drains none.
  findings.erase(std::remove_if(findings.begin(), findings.end(),
                                [](const Finding& f) { return f.nodes.size() != 1; }),
                 findings.end());
  return ErrorsByNode(findings);
}

SlurmDrain DrainOf(const NodeSpec& node, const std::string& why, const std::string& by) {
  return {node.host, node.MachineName(), Reason(by, why)};
}

std::vector<SlurmDrain> PlanSlurmDrain(const ClusterSpec& placed,
                                       const std::map<std::string, std::string>& unfit) {
  std::vector<SlurmDrain> out;
  std::set<std::string> machines;
  for (const NodeSpec& node : placed.nodes) {
    auto it = unfit.find(node.host);
    if (it == unfit.end() || node.machine.empty() || !machines.insert(node.machine).second) {
      continue;
    }
    out.push_back(DrainOf(node, it->second, "dtrain doctor"));
  }
  return out;
}

std::vector<std::string> DrainSlurmNodes(const std::vector<SlurmDrain>& nodes, bool* all_ok) {
  std::vector<std::string> said;
  if (all_ok) *all_ok = true;
  for (const SlurmDrain& node : nodes) {
    const SlurmCommandResult done = RunSlurmCommand(
        {"scontrol", "update", "NodeName=" + node.machine, "State=DRAIN", "Reason=" + node.reason},
        "", kScontrolTimeoutMs);
    if (done.status == 0) {
      said.push_back(
          fmt::format("drained Slurm node {} (node {}): {}; `scontrol update "
                      "NodeName={} State=RESUME` puts it back",
                      node.machine, node.host, node.reason, node.machine));
      continue;
    }
    if (all_ok) *all_ok = false;
    said.push_back(fmt::format(
        "could not drain Slurm node {} (node {}): scontrol: {}; draining takes Slurm's operator "
        "or admin role (`sacctmgr show user $USER format=user,adminlevel`): ask an admin to run "
        "scontrol update NodeName={} State=DRAIN Reason=\"{}\"",
        node.machine, node.host, done.Describe(), node.machine, node.reason));
  }
  return said;
}

}  // namespace dtrain
