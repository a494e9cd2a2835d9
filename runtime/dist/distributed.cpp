#include "runtime/dist/distributed.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "runtime/dist/c10d_compat.h"
#include "runtime/dist/heartbeat.h"
#include "runtime/dist/process_set.h"
#include "runtime/trace/timeline.h"

namespace dtrain::clip {
namespace {

// The local IPv4 address this machine's routes use to reach `host` (no packet is sent), or ""
// when `host` does not resolve. Gloo binds it so that peers on other nodes can connect back.
std::string LocalAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) return "";
  std::string address;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t length = sizeof local;
  char text[INET_ADDRSTRLEN] = {};
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
      inet_ntop(AF_INET, &local.sin_addr, text, sizeof text)) {
    address = text;
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return address;
}

}  // namespace

CommunicatorOptions CommunicatorOptionsFor(const DistEnv& env, const std::string& backend,
                                           std::chrono::milliseconds timeout) {
  CommunicatorOptions options;
  options.backend = backend.empty() ? DefaultBackend() : backend;
  options.timeout = timeout;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    options.gloo_interface = ifname;
  } else if (env.master_addr.rfind("127.", 0) == 0 || env.master_addr == "localhost") {
    options.gloo_bind_host = "127.0.0.1";
  } else if (!env.master_addr.empty()) {
    // Not the address the hostname resolves to: that is often 127.0.1.1 or unresolvable, and
    // then Gloo falls back to loopback, which peers on other nodes cannot reach.
    options.gloo_bind_host = LocalAddressToward(env.master_addr);
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
  // The heartbeat and its stall inspector (runtime/dist/heartbeat.h): DTRAIN_STALL_TIMEOUT from
  // dtrain launch, else Horovod's HOROVOD_STALL_CHECK_TIME_SECONDS.
  double stall_s = 60;
  if (const char* v = std::getenv("HOROVOD_STALL_CHECK_TIME_SECONDS"); v && *v)
    stall_s = std::atof(v);
  if (const char* v = std::getenv("DTRAIN_STALL_TIMEOUT"); v && *v) stall_s = std::atof(v);
  const char* job_dir = std::getenv("DTRAIN_LOG_DIR");
  const char* off = std::getenv("DTRAIN_HEARTBEAT");  // 0: none (bench/heartbeat_cost.sh)
  // The host waits in Gloo's collectives; NCCL's are waited for by the GPU's stream.
  GlobalHeartbeat().TimeSteps(comm_options_.backend == "gloo");
  if (!(off && std::string(off) == "0"))
    GlobalHeartbeat().Start(
        job_dir && *job_dir ? std::string(job_dir) + "/heartbeat" : "", env.rank, env.world_size,
        compat::MakePrefixStore("dtrain/heartbeat", rendezvous_.store), stall_s);
}

Distributed::~Distributed() {
  GlobalHeartbeat().Stop();  // before the store it publishes to goes
}

std::unique_ptr<GradientSync> Distributed::MakeGradientSync(
    std::vector<std::pair<std::string, torch::Tensor>> named_parameters,
    const GradientSyncOptions& options) {
  if (!env_.distributed()) return nullptr;
  const int index = sync_groups_++;
  std::string prefix = "dtrain/grad-sync-" + std::to_string(index);
  CommunicatorOptions sync_options = comm_options_;
  sync_options.set_name = index == 0 ? "gradients" : "gradients-" + std::to_string(index);
  std::unique_ptr<Communicator> comm;
  if (options_.hierarchical_allreduce) {
    comm = MakeHierarchicalCommunicator(env_, rendezvous_.store, sync_options, prefix);
  } else {
    comm = MakeCommunicator(sync_options, compat::MakePrefixStore(prefix, rendezvous_.store),
                            env_.rank, env_.world_size);
  }
  return std::make_unique<GradientSync>(std::move(named_parameters), std::move(comm), options);
}

}  // namespace dtrain::clip
