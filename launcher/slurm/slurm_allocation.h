// SlurmAllocation: the Slurm job whose nodes a `transport: slurm` cluster runs on, found before
// any rank plan is made, so the plan names the allocated nodes from the start and no transport
// edits it. Either the caller's allocation (dtrain runs inside salloc or sbatch: SLURM_JOB_ID)
// or a batch job rendered from templates/sbatch.sh that only holds the nodes while dtrain runs
// steps in it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

// Who the Slurm job is, given by the caller (never read back from a rank's environment).
struct SlurmJobIdentity {
  std::string name = "dtrain";  // the batch job's name, and every step's
  std::string record_dir;       // where the submitted sbatch.sh is kept; "" = not kept
  // Slurm nodes an earlier job quarantined (dtrain launch --hold-back): left out of a batch job
  // (sbatch --exclude) unless Slurm refuses the job without them, and used last in the caller's
  // allocation.
  std::vector<std::string> avoid;
};

// One allocation, requested once. A batch job dtrain submitted is cancelled when it ends.
class SlurmAllocation {
 public:
  SlurmAllocation() = default;
  SlurmAllocation(const SlurmAllocation&) = delete;
  SlurmAllocation& operator=(const SlurmAllocation&) = delete;
  ~SlurmAllocation();

  // Adopts the caller's allocation, or submits a batch job sized for `spec` (its nodes, the most
  // slots on one of them as tasks per node). Throws dtrain::Error when sbatch refuses.
  void Request(const ClusterSpec& spec, const SlurmJobIdentity& job);
  // Whether the job runs and its nodes are known; asks squeue at most every 500 ms. Throws
  // dtrain::Error when the job ended before it started.
  bool Ready();
  // Cancels a batch job dtrain submitted (Ctrl-C while it waits for nodes).
  void Withdraw();
  // `spec` on the allocation's nodes (see PlaceOnNodes), each address its NodeAddr. Ready() first.
  ClusterSpec Place(const ClusterSpec& spec) const;

  const std::string& job_id() const { return job_id_; }  // "" for the caller's allocation
  // Whether the batch job went in with the nodes of `avoid` excluded (those Slurm has).
  bool excluded() const { return excluded_; }
  // The nodes of `avoid` that Slurm does not have now (sinfo lists no such node: a machine
  // renamed or removed since the record was written), left out of the exclusion, which sbatch
  // would refuse whole for them ("Invalid node name specified").
  const std::vector<std::string>& not_in_slurm() const { return not_in_slurm_; }
  // The allocation's nodes, in the order they are placed (Ready() first).
  const std::vector<std::string>& hosts() const { return hosts_; }

 private:
  SlurmJobIdentity job_;
  std::string job_id_;
  bool own_job_ = false;
  bool excluded_ = false;
  std::vector<std::string> not_in_slurm_;
  bool ready_ = false;
  std::vector<std::string> hosts_;
  std::string last_reason_;
  std::chrono::steady_clock::time_point next_check_{};
};

// `hosts` with those of `avoid` moved to the end, each part in its order: the nodes placed first
// are those no earlier job quarantined.
std::vector<std::string> PreferOthers(std::vector<std::string> hosts,
                                      const std::vector<std::string>& avoid);

// The names of `machines` that `sinfo -h -N -o %N` lists in `listed` (one node a line, a node
// of several partitions once each); every one when `listed` is empty (sinfo did not answer:
// sbatch judges).
std::vector<std::string> NodesSlurmHas(const std::vector<std::string>& machines,
                                       const std::string& listed);

// `slurm` with `machines` added to its sbatch --exclude (one the cluster file gives is kept).
SlurmSpec Excluding(SlurmSpec slurm, const std::vector<std::string>& machines);

// The pure part of placing: node i of `spec` keeps its name (host), slots, gpus and env and runs
// on Slurm node hosts[i] (its machine), reached at addresses[i]; the placement names `job_id`
// and `job_name`. Throws dtrain::Error when there are fewer hosts than nodes.
ClusterSpec PlaceOnNodes(const ClusterSpec& spec, const std::vector<std::string>& hosts,
                         const std::vector<std::string>& addresses, const std::string& job_id,
                         const std::string& job_name);

// For a `transport: slurm` spec: requests `allocation`, waits until it runs and returns `spec`
// placed on it. A SIGINT, SIGTERM or SIGHUP while it waits withdraws the job and throws
// dtrain::Error with exit status 128+signal. Any other spec comes back as it is.
ClusterSpec PlaceOnSlurm(const ClusterSpec& spec, const SlurmJobIdentity& job,
                         SlurmAllocation& allocation);

}  // namespace dtrain
