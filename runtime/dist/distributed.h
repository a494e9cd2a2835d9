// Distributed: this rank's place in the job and its ways to talk to the others, set up once at
// start (rendezvous, clock offset, world communicator). With one rank it holds no store and no
// communicator, and everything that takes one works locally.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/dist/communicator.h"
#include "runtime/dist/dist_env.h"
#include "runtime/dist/gradient_sync.h"
#include "runtime/dist/rendezvous.h"

namespace dtrain::clip {

struct DistributedOptions {
  std::string backend;  // --dist-backend; "" = DefaultBackend()
  std::chrono::milliseconds rendezvous_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds collective_timeout{std::chrono::minutes(5)};
  bool hierarchical_allreduce = false;  // --hierarchical-allreduce
  int clock_trips = 8;
};

class Distributed {
 public:
  // Collective over all ranks of `env`. Throws std::runtime_error with the rendezvous' context.
  Distributed(const DistEnv& env, const DistributedOptions& options);
  ~Distributed();

  const DistEnv& env() const { return env_; }
  const std::string& backend() const { return comm_options_.backend; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  // For the loss' gathers and metrics (main thread only); null with one rank.
  Communicator* world() { return world_.get(); }
  const Rendezvous& rendezvous() const { return rendezvous_; }

  // Collective. A synchroniser with its own communicator (hierarchical when asked); it broadcasts
  // rank 0's parameters first. Null with one rank.
  std::unique_ptr<GradientSync> MakeGradientSync(
      std::vector<std::pair<std::string, torch::Tensor>> named_parameters,
      const GradientSyncOptions& options);

 private:
  DistEnv env_;
  DistributedOptions options_;
  CommunicatorOptions comm_options_;
  Rendezvous rendezvous_;
  std::unique_ptr<Communicator> world_;
  int sync_groups_ = 0;
};

// Bind address for Gloo: GLOO_SOCKET_IFNAME wins; a loopback MASTER_ADDR binds loopback.
CommunicatorOptions CommunicatorOptionsFor(const DistEnv& env, const std::string& backend,
                                           std::chrono::milliseconds timeout);

}  // namespace dtrain::clip
