// The rank plan: layout of ranks over nodes and the environment of each rank.
#include <gtest/gtest.h>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "launcher/rank_plan.h"

namespace dtrain {
namespace {

ClusterSpec TwoNodes() {
  return ParseClusterText(R"(
nodes:
  - host: a
    address: 10.0.0.1
    slots: 2
    gpus: [4, 5]
    env: {ONLY_A: "1", SHARED: node}
  - host: b
    slots: 3
rendezvous: {port: 29555}
env: {SHARED: global, GLOBAL: "g h"}
)",
                          "t.yaml");
}

PlanOptions Options() {
  PlanOptions o;
  o.job_name = "j1";
  o.job_dir = "/logs/j1";
  o.launch_dir = "/here";
  o.cores_per_node = 12;
  return o;
}

TEST(RankPlan, LaysOutRanksNodeByNode) {
  RankPlan plan = MakeRankPlan(TwoNodes(), Options());
  EXPECT_EQ(plan.world_size, 5);
  EXPECT_EQ(plan.node_count, 2);
  EXPECT_EQ(plan.master_addr, "10.0.0.1");
  EXPECT_EQ(plan.master_port, 29555);
  ASSERT_EQ(plan.ranks.size(), 5u);
  const int node[] = {0, 0, 1, 1, 1};
  const int local[] = {0, 1, 0, 1, 2};
  for (int r = 0; r < 5; ++r) {
    const RankSlot& s = plan.ranks[r];
    EXPECT_EQ(s.rank, r);
    EXPECT_EQ(s.node_rank, node[r]);
    EXPECT_EQ(s.local_rank, local[r]);
    EXPECT_EQ(s.local_world_size, node[r] == 0 ? 2 : 3);
    EXPECT_EQ(s.host, node[r] == 0 ? "a" : "b");
    EXPECT_EQ(s.env.at("RANK"), std::to_string(r));
    EXPECT_EQ(s.env.at("LOCAL_RANK"), std::to_string(local[r]));
    EXPECT_EQ(s.env.at("WORLD_SIZE"), "5");
    EXPECT_EQ(s.env.at("NODE_RANK"), std::to_string(node[r]));
    EXPECT_EQ(s.env.at("MASTER_ADDR"), "10.0.0.1");
    EXPECT_EQ(s.env.at("MASTER_PORT"), "29555");
    EXPECT_EQ(s.env.at("HOROVOD_RANK"), std::to_string(r));
    EXPECT_EQ(s.env.at("HOROVOD_SIZE"), "5");
    EXPECT_EQ(s.env.at("HOROVOD_LOCAL_RANK"), std::to_string(local[r]));
    EXPECT_EQ(s.env.at("HOROVOD_HOSTNAME"), s.host);
    EXPECT_EQ(s.env.at("NPROC_PER_NODE"), node[r] == 0 ? "2" : "3");
    EXPECT_EQ(s.env.at("OMP_NUM_THREADS"), node[r] == 0 ? "6" : "4");
    EXPECT_EQ(s.env.at("PYTHONUNBUFFERED"), "1");
    EXPECT_EQ(s.env.at("DTRAIN_JOB"), "j1");
    EXPECT_EQ(s.env.at("DTRAIN_LOG_DIR"), "/logs/j1");
    EXPECT_EQ(s.env.at("DTRAIN_RESTART_COUNT"), "0");
    EXPECT_EQ(s.env.count("DTRAIN_TIMELINE"), 0u);
    EXPECT_EQ(s.env.count("PYTHONPATH"), 0u);
    EXPECT_EQ(s.python_path_head, "/here");
    EXPECT_EQ(s.env.at("GLOBAL"), "g h");
  }
  // Horovod's cross communicator: nodes holding the same local rank.
  EXPECT_EQ(plan.ranks[0].env.at("HOROVOD_CROSS_SIZE"), "2");
  EXPECT_EQ(plan.ranks[2].env.at("HOROVOD_CROSS_RANK"), "1");
  EXPECT_EQ(plan.ranks[4].env.at("HOROVOD_CROSS_SIZE"), "1");
  EXPECT_EQ(plan.ranks[4].env.at("HOROVOD_CROSS_RANK"), "0");
  // GPUs only where listed; per-node env wins over global env.
  EXPECT_EQ(plan.ranks[0].env.at("CUDA_VISIBLE_DEVICES"), "4");
  EXPECT_EQ(plan.ranks[1].env.at("CUDA_VISIBLE_DEVICES"), "5");
  EXPECT_EQ(plan.ranks[2].env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(plan.ranks[0].env.at("SHARED"), "node");
  EXPECT_EQ(plan.ranks[2].env.at("SHARED"), "global");
  EXPECT_EQ(plan.ranks[0].env.at("ONLY_A"), "1");
  EXPECT_EQ(plan.ranks[2].env.count("ONLY_A"), 0u);
}

TEST(RankPlan, NprocPerNodeOverridesSlotsAndSharesGpus) {
  PlanOptions o = Options();
  o.nproc_per_node = 4;
  RankPlan plan = MakeRankPlan(TwoNodes(), o);
  EXPECT_EQ(plan.world_size, 8);
  EXPECT_EQ(plan.ranks[7].local_rank, 3);
  EXPECT_EQ(plan.ranks[7].env.at("LOCAL_WORLD_SIZE"), "4");
  // Two GPUs for four ranks: shared round-robin.
  EXPECT_EQ(plan.ranks[2].env.at("CUDA_VISIBLE_DEVICES"), "4");
  EXPECT_EQ(plan.ranks[3].env.at("CUDA_VISIBLE_DEVICES"), "5");
  // Eight GPUs for two ranks: four each.
  ClusterSpec wide = ParseClusterText("nodes: [{host: a, slots: 2, gpus: [0,1,2,3,4,5,6,7]}]", "w");
  RankPlan wide_plan = MakeRankPlan(wide, Options());
  EXPECT_EQ(wide_plan.ranks[0].env.at("CUDA_VISIBLE_DEVICES"), "0,1,2,3");
  EXPECT_EQ(wide_plan.ranks[1].env.at("CUDA_VISIBLE_DEVICES"), "4,5,6,7");
}

// torchrun's --virtual-local-rank: LOCAL_RANK=0 everywhere, one GPU each from the node's list
// (gpus:, else CUDA_VISIBLE_DEVICES of the node's env, the cluster's env, or dtrain's own on
// this machine), else the local rank; Horovod's local rank stays the real one.
TEST(RankPlan, VirtualLocalRankGivesEachRankOneGpuAsDeviceZero) {
  PlanOptions options = Options();
  options.virtual_local_rank = true;
  RankPlan plan = MakeRankPlan(TwoNodes(), options);
  ASSERT_EQ(plan.ranks.size(), 5u);
  for (const RankSlot& slot : plan.ranks) EXPECT_EQ(slot.env.at("LOCAL_RANK"), "0");
  EXPECT_EQ(plan.ranks[0].env.at("CUDA_VISIBLE_DEVICES"), "4");  // node a's gpus: [4, 5]
  EXPECT_EQ(plan.ranks[1].env.at("CUDA_VISIBLE_DEVICES"), "5");
  EXPECT_EQ(plan.ranks[2].env.at("CUDA_VISIBLE_DEVICES"), "0");  // node b: no list anywhere
  EXPECT_EQ(plan.ranks[4].env.at("CUDA_VISIBLE_DEVICES"), "2");
  EXPECT_EQ(plan.ranks[4].env.at("HOROVOD_LOCAL_RANK"), "2");
  EXPECT_EQ(plan.ranks[4].local_rank, 2);

  ClusterSpec local = ParseClusterText("nodes: [{host: localhost, slots: 2}]\n", "l.yaml");
  options.own_visible_devices = "3, 7";
  RankPlan mine = MakeRankPlan(local, options);
  EXPECT_EQ(mine.ranks[0].env.at("CUDA_VISIBLE_DEVICES"), "3");
  EXPECT_EQ(mine.ranks[1].env.at("CUDA_VISIBLE_DEVICES"), "7");
  ClusterSpec listed = ParseClusterText(
      "nodes: [{host: localhost, slots: 2}]\nenv: {CUDA_VISIBLE_DEVICES: \"6,1\"}\n", "e.yaml");
  EXPECT_EQ(MakeRankPlan(listed, options).ranks[1].env.at("CUDA_VISIBLE_DEVICES"), "1");
  options.own_visible_devices = "3";
  try {
    MakeRankPlan(local, options);
    ADD_FAILURE() << "two ranks on one listed GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_EQ(std::string(e.what()),
              "--virtual-local-rank: local rank 1 on node localhost has no GPU of its own: "
              "dtrain's environment lists 1 (3); start fewer ranks per node or list more GPUs");
  }
}

TEST(RankPlan, TimelineRestartsWorkdirAndPythonPath) {
  ClusterSpec spec = ParseClusterText(
      "nodes: [{host: a, slots: 2}]\nworkdir: /proj\nenv: {PYTHONPATH: /extra, OMP_NUM_THREADS: "
      "'3'}\n",
      "t");
  PlanOptions o = Options();
  o.timeline = true;
  o.restart_count = 2;
  RankPlan plan = MakeRankPlan(spec, o);
  const RankSlot& s = plan.ranks[1];
  EXPECT_EQ(s.env.at("DTRAIN_TIMELINE"), "/logs/j1/timeline/rank-1.json");
  EXPECT_EQ(s.env.at("HOROVOD_TIMELINE"), "/logs/j1/timeline/rank-1.json");
  EXPECT_EQ(s.env.at("DTRAIN_RESTART_COUNT"), "2");
  EXPECT_EQ(s.python_path_head, "/proj:/extra");
  EXPECT_EQ(s.env.count("PYTHONPATH"), 0u);
  EXPECT_EQ(s.env.at("OMP_NUM_THREADS"), "3");

  o.omp_num_threads_set = true;
  ClusterSpec plain = ParseClusterText("nodes: [{host: a}]", "p");
  EXPECT_EQ(MakeRankPlan(plain, o).ranks[0].env.count("OMP_NUM_THREADS"), 0u);
}

// torchrun's variables (torch/distributed/elastic/agent/server/local_elastic_agent.py); the
// values torchrun itself gives are checked against a real torchrun in torchrun_parity_test.
TEST(RankPlan, TorchElasticVariablesAsTorchrunSetsThem) {
  PlanOptions o = Options();
  o.restart_count = 1;
  o.max_restarts = 3;
  RankPlan plan = MakeRankPlan(TwoNodes(), o);
  const RankSlot& s = plan.ranks[3];
  EXPECT_EQ(s.env.at("GROUP_RANK"), "1");
  EXPECT_EQ(s.env.at("GROUP_WORLD_SIZE"), "2");
  EXPECT_EQ(s.env.at("ROLE_NAME"), "default");
  EXPECT_EQ(s.env.at("ROLE_RANK"), "3");
  EXPECT_EQ(s.env.at("ROLE_WORLD_SIZE"), "5");
  EXPECT_EQ(s.env.at("TORCHELASTIC_RUN_ID"), "j1");
  EXPECT_EQ(s.env.at("TORCHELASTIC_RESTART_COUNT"), "1");
  EXPECT_EQ(s.env.at("TORCHELASTIC_MAX_RESTARTS"), "3");
  EXPECT_EQ(s.env.at("TORCHELASTIC_USE_AGENT_STORE"), "False");
  EXPECT_EQ(s.env.at("TORCHELASTIC_ERROR_FILE"), "/logs/j1/errors/attempt-1/rank-3.json");
  EXPECT_EQ(s.env.at("TORCHELASTIC_SIGNALS_TO_HANDLE"), "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  EXPECT_EQ(s.env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "1");

  o.role = "trainer";
  o.agent_store = true;
  o.nccl_async_error_handling = "0";
  plan = MakeRankPlan(TwoNodes(), o);
  EXPECT_EQ(plan.ranks[0].env.at("ROLE_NAME"), "trainer");
  EXPECT_EQ(plan.ranks[0].env.at("TORCHELASTIC_USE_AGENT_STORE"), "True");
  EXPECT_EQ(plan.ranks[0].env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "0");
  EXPECT_EQ(ParseClusterText("nodes: [{host: a}]\njob: {role: trainer}\n", "r").job.role,
            "trainer");
}

}  // namespace
}  // namespace dtrain
