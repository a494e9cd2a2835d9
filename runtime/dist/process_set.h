// ProcessSet: a named subgroup of the world's ranks with its own communicator, met through its own
// PrefixStore namespace. Only members build one; collectives on it involve its members only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/dist/communicator.h"
#include "runtime/dist/dist_env.h"

namespace dtrain::clip {

struct ProcessSet {
  std::string name;
  std::vector<int> ranks;  // global ranks, ascending; a member's rank in the set is its index
  std::unique_ptr<Communicator> comm;  // null where this rank is not a member
};

// Collective over the set's members only. `namespace_prefix` keeps sets of different users apart.
ProcessSet MakeProcessSet(const std::string& name, std::vector<int> ranks, int global_rank,
                          const c10::intrusive_ptr<c10d::Store>& store,
                          const CommunicatorOptions& options,
                          const std::string& namespace_prefix = "dtrain");

// A world communicator whose AllreduceSum is hierarchical (Horovod's
// HOROVOD_HIERARCHICAL_ALLREDUCE): reduce within each node to its local rank 0, allreduce across
// the nodes' leaders, broadcast back within each node. Other collectives go over a flat world
// group. Collective over all ranks.
std::unique_ptr<Communicator> MakeHierarchicalCommunicator(
    const DistEnv& env, const c10::intrusive_ptr<c10d::Store>& store,
    const CommunicatorOptions& options, const std::string& namespace_prefix);

}  // namespace dtrain::clip
