#include "runtime/dist/link_bandwidth.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>

#include <unistd.h>

#include "runtime/dist/c10d_compat.h"
#include "runtime/dist/process_set.h"

namespace dtrain::clip {
namespace {

using Clock = std::chrono::steady_clock;

torch::Device BandwidthDevice(const std::string& backend, const DistEnv& env) {
  if (backend != "nccl") return torch::kCPU;
  const int count = static_cast<int>(torch::cuda::device_count());
  if (count == 0) throw std::runtime_error("the nccl backend needs a GPU and none is visible");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank % count));
}

// Seconds of the fastest of `iterations` allreduces of `bytes` over `comm`, after one untimed
// warm-up. The fastest, not the mean: on shared machines a pass can be slowed by anything else
// running, while a slow link or node is slow every time. Every member runs the same number of
// operations, so nobody waits on a collective the others never start.
double SecondsPerAllreduce(Communicator& comm, int64_t bytes, int iterations,
                           const torch::Device& device) {
  torch::Tensor data =
      torch::ones({std::max<int64_t>(1, bytes / 4)}, torch::dtype(torch::kFloat32).device(device));
  comm.AllreduceSum(data);
  comm.Barrier();
  double best = 0;
  for (int i = 0; i < std::max(1, iterations); ++i) {
    if (device.is_cuda()) torch::cuda::synchronize();
    const auto start = Clock::now();
    comm.AllreduceSum(data);
    if (device.is_cuda()) torch::cuda::synchronize();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (i == 0 || seconds < best) best = seconds;
  }
  return best;
}

std::string HostName() {
  if (const char* h = std::getenv("HOROVOD_HOSTNAME"); h && *h) return h;
  char buf[256] = {};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("?");
}

// One line per figure; only the group's lowest rank prints it.
void Report(std::FILE* out, const char* kind, const std::vector<int>& nodes, int ranks,
            const std::string& backend, int64_t bytes, double seconds) {
  std::string list;
  for (int n : nodes) list += (list.empty() ? "" : ",") + std::to_string(n);
  const double algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  std::fprintf(out,
               "dtrain-bandwidth {\"kind\":\"%s\",\"nodes\":[%s],\"ranks\":%d,\"backend\":\"%s\","
               "\"bytes\":%lld,\"seconds\":%.6f,\"algbw_gbs\":%.6f,\"busbw_gbs\":%.6f}\n",
               kind, list.c_str(), ranks, backend.c_str(), static_cast<long long>(bytes), seconds,
               algbw, AllreduceBusBandwidth(bytes, seconds, ranks));
  std::fflush(out);
}

}  // namespace

void RunLinkBandwidth(Distributed& dist, const LinkBandwidthOptions& options, std::FILE* out) {
  const DistEnv& env = dist.env();
  const std::string backend = dist.backend();
  const torch::Device device = BandwidthDevice(backend, env);
  std::fprintf(out, "dtrain-bandwidth-rank {\"rank\":%d,\"node\":%d,\"host\":\"%s\"}\n", env.rank,
               env.node(), HostName().c_str());
  std::fflush(out);
  if (!env.distributed()) return;
  Communicator& world = *dist.world();
  const int nodes = env.nodes();
  const int per_node = env.local_world_size;
  auto store = dist.rendezvous().store;
  CommunicatorOptions set_options =
      CommunicatorOptionsFor(env, backend, std::chrono::milliseconds(std::chrono::minutes(2)));
  set_options.set_name = "bandwidth";

  // 1. Every rank together: what a data-parallel job's allreduce gets.
  std::vector<int> all_nodes;
  for (int n = 0; n < nodes; ++n) all_nodes.push_back(n);
  double seconds = SecondsPerAllreduce(world, options.bytes, options.iterations, device);
  if (env.rank == 0) Report(out, "all", all_nodes, env.world_size, backend, options.bytes, seconds);

  // 2. Within each node, all nodes at once (NVLink / PCIe / shared memory between local ranks).
  if (per_node > 1) {
    std::vector<int> members;
    for (int l = 0; l < per_node; ++l) members.push_back(env.node() * per_node + l);
    world.Barrier();
    ProcessSet node_set = MakeProcessSet("node" + std::to_string(env.node()), members, env.rank,
                                         store, set_options, "dtrain/bandwidth");
    seconds = SecondsPerAllreduce(*node_set.comm, options.bytes, options.iterations, device);
    if (env.local_rank == 0) {
      Report(out, "node", {env.node()}, per_node, backend, options.bytes, seconds);
    }
  }

  // 3. Pairs of nodes, between their local ranks 0; the pairs of one round run at once.
  if (options.pairs && nodes > 2) {
    const auto rounds = NodePairRounds(nodes);
    std::vector<std::pair<int, int>> edges;
    for (const auto& round : rounds) edges.insert(edges.end(), round.begin(), round.end());
    // Edge `index` measured between its nodes' local ranks 0 (the others pass), reported as
    // `kind` and its bus bandwidth put in `into` by the first node's.
    auto measure = [&](const char* kind, size_t index, torch::Tensor& into) {
      const int a = edges[index].first, b = edges[index].second;
      if (env.local_rank != 0 || (env.node() != a && env.node() != b)) return;
      ProcessSet pair = MakeProcessSet(
          std::string(kind) + "-" + std::to_string(a) + "-" + std::to_string(b),
          {a * per_node, b * per_node}, env.rank, store, set_options, "dtrain/bandwidth");
      seconds = SecondsPerAllreduce(*pair.comm, options.bytes, options.iterations, device);
      if (env.node() == a) {
        Report(out, kind, {a, b}, 2, backend, options.bytes, seconds);
        into[static_cast<int64_t>(index)] = AllreduceBusBandwidth(options.bytes, seconds, 2);
      }
    };
    torch::Tensor figures = torch::zeros({static_cast<int64_t>(edges.size())},
                                         torch::dtype(torch::kFloat64).device(device));
    size_t edge = 0;
    for (const auto& round : rounds) {
      world.Barrier();
      for (size_t i = 0; i < round.size(); ++i) measure("pair", edge++, figures);
    }
    // 4. The pairs that fell below half the reference, measured again one at a time: the pairs of
    // a round share whatever their nodes share (on one machine, its cores); a slow link stays
    // slow alone. A figure measured alone replaces the shared one, which can raise the reference
    // and put another pair below half of it: that one is measured alone too, until no pair below
    // half the reference is left unmeasured alone (the doctor judges with the same figures and
    // reference). Every rank gets every figure and so picks the same pairs.
    world.AllreduceSum(figures);
    std::vector<double> values(edges.size());
    std::vector<bool> alone(edges.size(), false);
    auto read_back = [&](const torch::Tensor& t) {
      const torch::Tensor all = t.to(torch::kCPU);
      for (size_t i = 0; i < edges.size(); ++i) {
        const double v = all[static_cast<int64_t>(i)].item<double>();
        if (v > 0) values[i] = v;
      }
    };
    read_back(figures);
    for (;;) {
      const std::vector<size_t> again = PairsToMeasureAlone(edges, values, nodes, alone);
      if (again.empty()) break;
      torch::Tensor measured = torch::zeros({static_cast<int64_t>(edges.size())},
                                            torch::dtype(torch::kFloat64).device(device));
      for (size_t i : again) {
        alone[i] = true;
        world.Barrier();
        measure("pair_alone", i, measured);
      }
      world.AllreduceSum(measured);
      read_back(measured);
    }
  }
  world.Barrier();
}

}  // namespace dtrain::clip
