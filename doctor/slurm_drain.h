// `dtrain doctor --drain`: the Slurm nodes the doctor found unfit are drained (scontrol update
// State=DRAIN), as a cluster health checker marks a node offline, so that no job of anyone's is
// placed there until an admin resumes it. Unfit is what the launch would quarantine: an error of
// the rules about a node's own fitness (NodeFitnessFindings: GPUs, NVLink, Xid, InfiniBand, free
// space, the job's interfaces, the cluster file's health checks, the peer test), a node not
// reached, and a GPU that --compute found computing wrong results or hanging; never a version
// that differs from the other nodes' (the job's environment, not the node), nor a finding that
// names several nodes (a pair that cannot connect: which one is at fault is not known).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "doctor/checks.h"
#include "doctor/probe_runner.h"
#include "launcher/cluster_spec.h"

namespace dtrain {

// One Slurm node to drain.
struct SlurmDrain {
  std::string host;     // the cluster file's name
  std::string machine;  // the Slurm node it ran on
  std::string reason;   // Slurm's Reason: "dtrain doctor: WHY", at most kMaxDrainReason bytes
};

// Slurm keeps a reason of any length; sinfo -R shows its start. Cut to this many bytes.
constexpr size_t kMaxDrainReason = 200;

// Host -> why for each node unfit by the launch's measure on the doctor's `run` (the cluster
// `placed` on its allocation), and by `compute` (--compute's findings; empty without it).
std::map<std::string, std::string> UnfitToDrain(const ClusterSpec& placed, const ProbeRun& run,
                                                const std::vector<Finding>& compute);

// `node` (placed: its machine known) to drain for `why`, the reason "BY: WHY" (BY: "dtrain doctor",
// "dtrain launch").
SlurmDrain DrainOf(const NodeSpec& node, const std::string& why, const std::string& by);

// The nodes of `placed` (the cluster on its Slurm allocation: each node's machine) that
// `unfit` (host -> why, the errors naming it) names, in cluster order, a machine once.
std::vector<SlurmDrain> PlanSlurmDrain(const ClusterSpec& placed,
                                       const std::map<std::string, std::string>& unfit);

// Drains each with `scontrol update NodeName=M State=DRAIN Reason=...`; returns a line per node
// for the console: "drained Slurm node node2 (node b): WHY; `scontrol update NodeName=node2
// State=RESUME` puts it back", or what scontrol said and what to do. `all_ok` (optional) is set
// false when one could not be drained.
std::vector<std::string> DrainSlurmNodes(const std::vector<SlurmDrain>& nodes,
                                         bool* all_ok = nullptr);

}  // namespace dtrain
