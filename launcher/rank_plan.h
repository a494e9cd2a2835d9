// RankPlan: nodes x slots -> global rank, local rank, node rank, and the environment each rank
// sees (DESIGN.md "What every rank sees"). Pure data: no processes, no files.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

struct PlanOptions {
  int nproc_per_node = 0;   // > 0 overrides every node's slots
  std::string master_addr;  // "" = the first node's address
  std::string job_name;
  std::string run_id;      // TORCHELASTIC_RUN_ID; "" = job_name
  std::string job_dir;     // <log_dir>/<job> as the ranks should see it
  std::string launch_dir;  // PYTHONPATH head for local runs (when workdir is empty)
  bool timeline = false;
  double stall_timeout_s = 0;  // > 0: DTRAIN_STALL_TIMEOUT, so dtrain-clip's own watch agrees
  int restart_count = 0;
  int max_restarts = 0;  // TORCHELASTIC_MAX_RESTARTS
  std::string role;      // ROLE_NAME; "" = torchrun's "default"
  // torchrun's --virtual-local-rank: every rank sees LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES of
  // one GPU, its local rank's entry in the node's list (the node's `gpus:`, else the
  // CUDA_VISIBLE_DEVICES of its env, the cluster file's, or, on this machine, dtrain's own:
  // own_visible_devices), else the local rank itself. A list too short is a UsageError.
  bool virtual_local_rank = false;
  std::string own_visible_devices;  // CUDA_VISIBLE_DEVICES where dtrain runs; "" unset
  std::string signals_to_handle;    // TORCHELASTIC_SIGNALS_TO_HANDLE; "" = torchrun's default
  // dtrain hosts the job's TCPStore (launcher/job_store.h): TORCHELASTIC_USE_AGENT_STORE=True,
  // so every rank is a client of it; false: rank 0 hosts it, as before.
  bool agent_store = false;
  // TORCH_NCCL_ASYNC_ERROR_HANDLING: torchrun's agent passes on its own value, else "1".
  std::string nccl_async_error_handling = "1";
  int cores_per_node = 0;            // OMP_NUM_THREADS = cores / local ranks; 0: this machine's
  bool omp_num_threads_set = false;  // OMP_NUM_THREADS already set where ranks run: keep it
};

struct RankSlot {
  int rank = 0;
  int local_rank = 0;
  int node_rank = 0;  // index into ClusterSpec::nodes
  int local_world_size = 0;
  std::string host;     // NodeSpec::host
  std::string address;  // NodeSpec::address
  // Variables set for this rank. PYTHONPATH is not here: see python_path_head.
  std::map<std::string, std::string> env;
  // Prepended to the PYTHONPATH the rank's node already has ("head:old", or "head" if unset);
  // resolved where the rank runs, because only that side knows its old value.
  std::string python_path_head;
};

struct RankPlan {
  int world_size = 0;
  int node_count = 0;
  std::string master_addr;
  int master_port = 0;
  std::vector<RankSlot> ranks;
};

RankPlan MakeRankPlan(const ClusterSpec& spec, const PlanOptions& options);

// Where rank `rank` of attempt `attempt` finds TORCHELASTIC_ERROR_FILE, torch's @record error
// file: <job_dir>/errors/attempt-A/rank-R.json, so no attempt reads another's.
std::string ErrorFilePath(const std::string& job_dir, int attempt, int rank);

}  // namespace dtrain
