#include "runtime/dist/dist_env.h"

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace dtrain::clip {
namespace {

// One family of variable names for rank/size/local rank/local size; "" where it has none.
struct EnvNames {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

const std::vector<EnvNames>& Families() {
  static const std::vector<EnvNames> families = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
      {"horovod", "HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
  };
  return families;
}

int ParseInt(const std::string& name, const std::string& value, int min) {
  char* end = nullptr;
  long parsed = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || parsed < min || parsed > (1 << 30)) {
    throw std::runtime_error("environment variable " + name + "='" + value +
                             "' is not an integer >= " + std::to_string(min));
  }
  return static_cast<int>(parsed);
}

// SLURM_NTASKS_PER_NODE may read "2(x3)"; the count before the parenthesis is what we need.
std::string LeadingCount(const std::string& value) {
  return value.substr(0, value.find('('));
}

}  // namespace

DistEnv ReadDistEnv(const std::function<std::string(const std::string&)>& lookup) {
  DistEnv env;
  for (const EnvNames& names : Families()) {
    std::string rank = lookup(names.rank);
    std::string size = lookup(names.world_size);
    if (rank.empty() || size.empty()) continue;
    env.source = names.source;
    env.rank = ParseInt(names.rank, rank, 0);
    env.world_size = ParseInt(names.world_size, size, 1);
    std::string local_rank = lookup(names.local_rank);
    std::string local_size = LeadingCount(lookup(names.local_world_size));
    env.local_rank = local_rank.empty() ? env.rank : ParseInt(names.local_rank, local_rank, 0);
    env.local_world_size =
        local_size.empty() ? env.world_size : ParseInt(names.local_world_size, local_size, 1);
    break;
  }
  if (env.rank >= env.world_size) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + " from the " + env.source +
                             " variables is not below the world size " +
                             std::to_string(env.world_size));
  }
  if (env.local_world_size > env.world_size || env.world_size % env.local_world_size != 0 ||
      env.local_rank >= env.local_world_size) {
    // Uneven layouts still train; only the node arithmetic (hierarchical allreduce) needs it.
    env.local_world_size = env.world_size;
    env.local_rank = env.rank;
  }
  if (std::string addr = lookup("MASTER_ADDR"); !addr.empty()) env.master_addr = addr;
  if (std::string port = lookup("MASTER_PORT"); !port.empty()) {
    env.master_port = ParseInt("MASTER_PORT", port, 1);
  }
  return env;
}

DistEnv ReadDistEnvFromProcess() {
  return ReadDistEnv([](const std::string& name) {
    const char* value = std::getenv(name.c_str());
    return std::string(value ? value : "");
  });
}

}  // namespace dtrain::clip
