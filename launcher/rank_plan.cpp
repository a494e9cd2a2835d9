// Lays out ranks node by node (node 0 gets ranks 0..slots-1, node 1 the next, ...) and writes
// the environment of DESIGN.md "What every rank sees" for each.
#include "launcher/rank_plan.h"

#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/error.h"
#include "launcher/handled_signals.h"

namespace dtrain {
namespace {

int SlotsOf(const NodeSpec& node, const PlanOptions& options) {
  return options.nproc_per_node > 0 ? options.nproc_per_node : node.slots;
}

// The GPUs rank `local_rank` of `local_size` gets from the node's list: an equal share when
// there are at least as many GPUs as ranks, else one GPU shared round-robin.
std::string GpusFor(const std::vector<int>& gpus, int local_rank, int local_size) {
  const int count = static_cast<int>(gpus.size());
  std::string out;
  if (count >= local_size) {
    const int share = count / local_size;
    for (int i = local_rank * share; i < (local_rank + 1) * share; ++i) {
      out += (out.empty() ? "" : ",") + std::to_string(gpus[i]);
    }
  } else {
    out = std::to_string(gpus[local_rank % count]);
  }
  return out;
}

void AddTorchElasticEnv(const PlanOptions& options, int rank, int world_size,
                        std::map<std::string, std::string>& env) {
  // torch/distributed/elastic/agent/server/local_elastic_agent.py, _start_workers: one role.
  env["ROLE_NAME"] = options.role.empty() ? "default" : options.role;
  env["ROLE_RANK"] = std::to_string(rank);
  env["ROLE_WORLD_SIZE"] = std::to_string(world_size);
  env["TORCHELASTIC_RUN_ID"] = options.run_id.empty() ? options.job_name : options.run_id;
  env["TORCHELASTIC_RESTART_COUNT"] = std::to_string(options.restart_count);
  env["TORCHELASTIC_MAX_RESTARTS"] = std::to_string(options.max_restarts);
  env["TORCHELASTIC_USE_AGENT_STORE"] = options.agent_store ? "True" : "False";
  env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = options.nccl_async_error_handling;
  // .../elastic/multiprocessing/api.py: what @record writes to, and the signals the rank's
  // own start_processes would hand on.
  env["TORCHELASTIC_ERROR_FILE"] = ErrorFilePath(options.job_dir, options.restart_count, rank);
  env["TORCHELASTIC_SIGNALS_TO_HANDLE"] =
      options.signals_to_handle.empty() ? kDefaultHandledSignals : options.signals_to_handle;
}

// torch/distributed/elastic/agent/server/local_elastic_agent.py, _set_local_rank_env: the
// local rank's entry of the GPUs the node's ranks may see.
void SetVirtualLocalRank(const ClusterSpec& spec, const NodeSpec& node, const PlanOptions& options,
                         int local_rank, std::map<std::string, std::string>& env) {
  env["LOCAL_RANK"] = "0";
  std::vector<std::string> gpus;
  std::string from;
  if (!node.gpus.empty()) {
    for (int g : node.gpus) gpus.push_back(std::to_string(g));
    from = "the gpus: of node " + node.host;
  } else {
    std::string visible;
    if (auto it = node.env.find("CUDA_VISIBLE_DEVICES"); it != node.env.end()) {
      visible = it->second;
      from = "the env of node " + node.host;
    } else if (auto it = spec.env.find("CUDA_VISIBLE_DEVICES"); it != spec.env.end()) {
      visible = it->second;
      from = "the env of " + (spec.source.empty() ? std::string("the cluster") : spec.source);
    } else if (spec.transport == TransportKind::kLocal && !options.own_visible_devices.empty()) {
      visible = options.own_visible_devices;
      from = "dtrain's environment";
    }
    for (size_t at = 0; !visible.empty() && at <= visible.size();) {
      const size_t comma = std::min(visible.find(',', at), visible.size());
      std::string id = visible.substr(at, comma - at);
      id.erase(0, id.find_first_not_of(" \t"));
      id.erase(id.find_last_not_of(" \t") + 1);
      gpus.push_back(id);
      at = comma + 1;
    }
  }
  if (gpus.empty()) {
    env["CUDA_VISIBLE_DEVICES"] = std::to_string(local_rank);
    return;
  }
  if (local_rank >= static_cast<int>(gpus.size())) {
    throw UsageError(fmt::format(
        "--virtual-local-rank: local rank {} on node {} has no GPU of its own: {} lists {} ({}); "
        "start fewer ranks per node or list more GPUs",
        local_rank, node.host, from, gpus.size(), fmt::join(gpus, ",")));
  }
  env["CUDA_VISIBLE_DEVICES"] = gpus[local_rank];
}

}  // namespace

std::string ErrorFilePath(const std::string& job_dir, int attempt, int rank) {
  return fmt::format("{}/errors/attempt-{}/rank-{}.json", job_dir, attempt, rank);
}

RankPlan MakeRankPlan(const ClusterSpec& spec, const PlanOptions& options) {
  if (spec.nodes.empty()) throw UsageError(spec.source + ": the cluster has no nodes");
  RankPlan plan;
  plan.node_count = static_cast<int>(spec.nodes.size());
  plan.master_addr = options.master_addr.empty() ? spec.nodes.front().address : options.master_addr;
  plan.master_port = spec.rendezvous_port;
  int max_slots = 0;
  for (const NodeSpec& node : spec.nodes) {
    plan.world_size += SlotsOf(node, options);
    max_slots = std::max(max_slots, SlotsOf(node, options));
    if (plan.world_size > kMaxRanks) {
      throw UsageError(
          fmt::format("{}: more than {} ranks in all; a cluster that large is not "
                      "what dtrain launches",
                      spec.source.empty() ? "the cluster" : spec.source, kMaxRanks));
    }
  }
  // Horovod's cross communicator for local rank L holds the nodes that have a rank L.
  std::vector<int> cross_size(max_slots, 0);
  for (const NodeSpec& node : spec.nodes) {
    for (int l = 0; l < SlotsOf(node, options); ++l) ++cross_size[l];
  }
  std::vector<int> cross_seen(max_slots, 0);

  const int cores = options.cores_per_node > 0
                        ? options.cores_per_node
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  int rank = 0;
  for (int n = 0; n < plan.node_count; ++n) {
    const NodeSpec& node = spec.nodes[n];
    const int local_size = SlotsOf(node, options);
    for (int l = 0; l < local_size; ++l, ++rank) {
      RankSlot slot;
      slot.rank = rank;
      slot.local_rank = l;
      slot.node_rank = n;
      slot.local_world_size = local_size;
      slot.host = node.host;
      slot.address = node.address;
      auto& env = slot.env;
      env["RANK"] = std::to_string(rank);
      env["LOCAL_RANK"] = std::to_string(l);
      env["WORLD_SIZE"] = std::to_string(plan.world_size);
      env["LOCAL_WORLD_SIZE"] = std::to_string(local_size);
      env["NODE_RANK"] = std::to_string(n);
      env["GROUP_RANK"] = std::to_string(n);
      env["GROUP_WORLD_SIZE"] = std::to_string(plan.node_count);
      env["MASTER_ADDR"] = plan.master_addr;
      env["MASTER_PORT"] = std::to_string(plan.master_port);
      env["HOROVOD_RANK"] = std::to_string(rank);
      env["HOROVOD_SIZE"] = std::to_string(plan.world_size);
      env["HOROVOD_LOCAL_RANK"] = std::to_string(l);
      env["HOROVOD_LOCAL_SIZE"] = std::to_string(local_size);
      env["HOROVOD_CROSS_RANK"] = std::to_string(cross_seen[l]++);
      env["HOROVOD_CROSS_SIZE"] = std::to_string(cross_size[l]);
      env["HOROVOD_HOSTNAME"] = node.MachineName();
      env["NPROC_PER_NODE"] = std::to_string(local_size);
      if (!node.gpus.empty()) env["CUDA_VISIBLE_DEVICES"] = GpusFor(node.gpus, l, local_size);
      if (!options.omp_num_threads_set) {
        env["OMP_NUM_THREADS"] = std::to_string(std::max(1, cores / local_size));
      }
      env["PYTHONUNBUFFERED"] = "1";
      env["DTRAIN_JOB"] = options.job_name;
      env["DTRAIN_LOG_DIR"] = options.job_dir;
      if (options.stall_timeout_s > 0) {
        env["DTRAIN_STALL_TIMEOUT"] = fmt::format("{:g}", options.stall_timeout_s);
      }
      env["DTRAIN_NODE"] = node.host;
      env["DTRAIN_RESTART_COUNT"] = std::to_string(options.restart_count);
      AddTorchElasticEnv(options, rank, plan.world_size, env);
      // Where a PyTorch script exports its profiler trace (README, `dtrain timeline`).
      env["DTRAIN_TRACE_DIR"] = options.job_dir + "/timeline";
      if (options.timeline) {
        const std::string trace = fmt::format("{}/timeline/rank-{}.json", options.job_dir, rank);
        env["DTRAIN_TIMELINE"] = trace;
        env["HOROVOD_TIMELINE"] = trace;
      }
      for (const auto& [name, value] : spec.env) env[name] = value;
      for (const auto& [name, value] : node.env) env[name] = value;
      if (options.virtual_local_rank) SetVirtualLocalRank(spec, node, options, l, env);
      slot.python_path_head = spec.workdir.empty() ? options.launch_dir : spec.workdir;
      // A PYTHONPATH from the cluster file's env comes after the head, like an inherited one.
      if (auto it = env.find("PYTHONPATH"); it != env.end()) {
        if (!it->second.empty()) slot.python_path_head += ":" + it->second;
        env.erase(it);
      }
      plan.ranks.push_back(std::move(slot));
    }
  }
  return plan;
}

}  // namespace dtrain
