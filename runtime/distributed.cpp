#include "runtime/distributed.h"

#include <cstdlib>

#include "runtime/c10d_compat.h"
#include "runtime/process_set.h"
#include "runtime/timeline.h"

namespace dtrain::clip {

CommunicatorOptions CommunicatorOptionsFor(const DistEnv& env, const std::string& backend,
                                           std::chrono::milliseconds timeout) {
  CommunicatorOptions options;
  options.backend = backend.empty() ? DefaultBackend() : backend;
  options.timeout = timeout;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    options.gloo_interface = ifname;
  } else if (env.master_addr.rfind("127.", 0) == 0 || env.master_addr == "localhost") {
    options.gloo_bind_host = "127.0.0.1";
  }
  return options;
}

Distributed::Distributed(const DistEnv& env, const DistributedOptions& options)
    : env_(env), options_(options) {
  comm_options_ = CommunicatorOptionsFor(env, options.backend, options.collective_timeout);
  if (!env.distributed()) return;
  rendezvous_ = MeetAllRanks(env, options.rendezvous_timeout);
  MeasureClockOffset(*rendezvous_.store, env, options.clock_trips, rendezvous_);
  GlobalTimeline().SetClockOffset(rendezvous_.clock_offset_us, rendezvous_.clock_round_trip_us);
  world_ =
      MakeCommunicator(comm_options_, compat::MakePrefixStore("dtrain/world", rendezvous_.store),
                       env.rank, env.world_size);
}

Distributed::~Distributed() = default;

std::unique_ptr<GradientSync> Distributed::MakeGradientSync(
    std::vector<std::pair<std::string, torch::Tensor>> named_parameters,
    const GradientSyncOptions& options) {
  if (!env_.distributed()) return nullptr;
  std::string prefix = "dtrain/grad-sync-" + std::to_string(sync_groups_++);
  std::unique_ptr<Communicator> comm;
  if (options_.hierarchical_allreduce) {
    comm = MakeHierarchicalCommunicator(env_, rendezvous_.store, comm_options_, prefix);
  } else {
    comm = MakeCommunicator(comm_options_, compat::MakePrefixStore(prefix, rendezvous_.store),
                            env_.rank, env_.world_size);
  }
  return std::make_unique<GradientSync>(std::move(named_parameters), std::move(comm), options);
}

}  // namespace dtrain::clip
