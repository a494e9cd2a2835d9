// DistEnv: who this process is in the job, read from the environment the launcher (or torchrun,
// horovodrun, mpirun, srun) set. Names are tried in DESIGN.md's order; nothing is global state.
#pragma once

#include <functional>
#include <string>

namespace dtrain::clip {

struct DistEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "default";  // which family of variables gave the rank: torchrun, ...

  bool distributed() const { return world_size > 1; }
  // Ranks are laid out node by node: rank = node * local_world_size + local_rank.
  int node() const { return local_world_size > 0 ? rank / local_world_size : 0; }
  int nodes() const { return local_world_size > 0 ? world_size / local_world_size : 1; }
};

// Reads variables through `lookup` (returns "" when unset) so tests need no real environment.
// Throws std::runtime_error naming the variable when a value is not a number or out of range.
DistEnv ReadDistEnv(const std::function<std::string(const std::string&)>& lookup);
DistEnv ReadDistEnvFromProcess();

}  // namespace dtrain::clip
