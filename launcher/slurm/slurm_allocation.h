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

 private:
  SlurmJobIdentity job_;
  std::string job_id_;
  bool own_job_ = false;
  bool ready_ = false;
  std::vector<std::string> hosts_;
  std::string last_reason_;
  std::chrono::steady_clock::time_point next_check_{};
};

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
