#include "runtime/dist/process_set.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/dist/c10d_compat.h"

namespace dtrain::clip {
namespace {

// See MakeHierarchicalCommunicator. Ranks are laid out node by node (DistEnv::node()).
class HierarchicalCommunicator : public Communicator {
 public:
  HierarchicalCommunicator(std::unique_ptr<Communicator> world, ProcessSet node, ProcessSet leaders)
      : world_(std::move(world)), node_(std::move(node)), leaders_(std::move(leaders)) {}

  const std::string& backend() const override { return world_->backend(); }
  int rank() const override { return world_->rank(); }
  int size() const override { return world_->size(); }
  const char* allreduce_activity() const override { return world_->allreduce_activity(); }

  void AllreduceSum(torch::Tensor& tensor) override {
    if (node_.comm->size() > 1) node_.comm->ReduceSum(tensor, 0);
    if (leaders_.comm && leaders_.comm->size() > 1) leaders_.comm->AllreduceSum(tensor);
    if (node_.comm->size() > 1) node_.comm->Broadcast(tensor, 0);
  }
  void ReduceSum(torch::Tensor& tensor, int root) override { world_->ReduceSum(tensor, root); }
  void Broadcast(torch::Tensor& tensor, int root) override { world_->Broadcast(tensor, root); }
  torch::Tensor Allgather(const torch::Tensor& tensor) override {
    return world_->Allgather(tensor);
  }
  void Barrier() override { world_->Barrier(); }

 private:
  std::unique_ptr<Communicator> world_;
  ProcessSet node_;
  ProcessSet leaders_;
};

}  // namespace

ProcessSet MakeProcessSet(const std::string& name, std::vector<int> ranks, int global_rank,
                          const c10::intrusive_ptr<c10d::Store>& store,
                          const CommunicatorOptions& options, const std::string& namespace_prefix) {
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty() || std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw std::runtime_error("process set '" + name + "' needs distinct ranks");
  }
  ProcessSet set{name, std::move(ranks), nullptr};
  auto member = std::find(set.ranks.begin(), set.ranks.end(), global_rank);
  if (member == set.ranks.end()) return set;
  int rank_in_set = static_cast<int>(member - set.ranks.begin());
  auto set_store = compat::MakePrefixStore(namespace_prefix + "/pset/" + name, store);
  CommunicatorOptions set_options = options;
  set_options.set_name = options.set_name + "/" + name;  // "gradients/leaders"
  set_options.members = set.ranks;
  set.comm =
      MakeCommunicator(set_options, set_store, rank_in_set, static_cast<int>(set.ranks.size()));
  return set;
}

std::unique_ptr<Communicator> MakeHierarchicalCommunicator(
    const DistEnv& env, const c10::intrusive_ptr<c10d::Store>& store,
    const CommunicatorOptions& options, const std::string& namespace_prefix) {
  std::vector<int> all(env.world_size), node_ranks, leader_ranks;
  for (int r = 0; r < env.world_size; ++r) all[r] = r;
  for (int l = 0; l < env.local_world_size; ++l) {
    node_ranks.push_back(env.node() * env.local_world_size + l);
  }
  for (int n = 0; n < env.nodes(); ++n) leader_ranks.push_back(n * env.local_world_size);
  ProcessSet world = MakeProcessSet("world", all, env.rank, store, options, namespace_prefix);
  ProcessSet node = MakeProcessSet("node" + std::to_string(env.node()), node_ranks, env.rank, store,
                                   options, namespace_prefix);
  ProcessSet leaders =
      MakeProcessSet("leaders", leader_ranks, env.rank, store, options, namespace_prefix);
  return std::make_unique<HierarchicalCommunicator>(std::move(world.comm), std::move(node),
                                                    std::move(leaders));
}

}  // namespace dtrain::clip
