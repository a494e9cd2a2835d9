// Allreduce throughput of dtrain-clip's gradient path against a raw c10d allreduce of the same
// bytes, measured in one run, side by side. The gradients live where the trainer keeps them, in
// one flat gradient buffer (FlatParameters), so the path is the trainer's: ready marks ->
// negotiation -> allreduce of views of that buffer -> averaged in place. Run as every rank of a
// job (bench/allreduce.sh starts 2); rank 0 prints the figures.
//   allreduce_bench [total-MiB=64] [tensors=64] [iterations=20] [fusion-MiB=64]
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "runtime/dist/distributed.h"
#include "runtime/trace/timeline.h"
#include "runtime/train/flat_parameters.h"

namespace {

using namespace dtrain::clip;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

struct Figures {
  double seconds = 0;
  double algbw_gbs(int64_t bytes) const { return bytes / seconds / 1e9; }
};

// The gradient path without autograd's own cost: the gradients are written into the flat
// gradient buffer (backward's work, not timed; dtrain-clip's backward writes them already
// divided by the world size), then every one is marked ready (as the hooks do once autograd has
// accumulated it) and Synchronize() waits until every .grad holds the average.
double FusionStep(const torch::Tensor& source, torch::Tensor& flat_grad, size_t tensors,
                  GradientSync& sync, Communicator& world) {
  flat_grad.copy_(source);
  world.Barrier();
  auto start = Clock::now();
  for (size_t i = 0; i < tensors; ++i) sync.MarkReady(i);
  sync.Synchronize();
  return Seconds(start);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int64_t total_mib = argc > 1 ? std::stoll(argv[1]) : 64;
    int64_t tensors = argc > 2 ? std::stoll(argv[2]) : 64;
    int iterations = argc > 3 ? std::stoi(argv[3]) : 20;
    int64_t fusion_mib = argc > 4 ? std::stoll(argv[4]) : 64;
    DistEnv env = ReadDistEnvFromProcess();
    DistributedOptions options;
    options.backend = "gloo";
    Distributed dist(env, options);
    GlobalTimeline().OpenFromEnvironment(env.rank,
                                         "localhost");  // HOROVOD_TIMELINE: rank 0's spans
    if (!dist.world()) throw std::runtime_error("run with WORLD_SIZE >= 2 (bench/allreduce.sh)");
    int64_t per_tensor = total_mib * (1 << 20) / 4 / tensors;
    int64_t bytes = per_tensor * tensors * 4;

    std::vector<std::pair<std::string, torch::Tensor>> params;
    std::vector<torch::Tensor> leaves;
    for (int64_t i = 0; i < tensors; ++i) {
      params.emplace_back("t" + std::to_string(i), torch::zeros({per_tensor}).requires_grad_());
      leaves.push_back(params.back().second);
    }
    FlatParameters flat_params({leaves});
    torch::Tensor flat_grad = flat_params.buffers()[0].grad();
    torch::Tensor source = torch::randn({per_tensor * tensors});
    GradientSyncOptions sync_options = GradientSyncOptionsFromEnvironment();
    sync_options.fusion_threshold_bytes = fusion_mib << 20;
    // As dtrain-clip trains: backward is seeded with 1/world, so the sum is the average.
    sync_options.gradients_prescaled = true;
    auto sync = dist.MakeGradientSync(params, sync_options);
    // The same path dividing by the world size after the sum, one more pass over the gradients.
    sync_options.gradients_prescaled = false;
    sync_options.broadcast_parameters = false;
    auto dividing_sync = dist.MakeGradientSync(params, sync_options);
    torch::Tensor flat = torch::randn({per_tensor * tensors});

    std::vector<torch::Tensor> separate;
    for (int64_t i = 0; i < tensors; ++i) separate.push_back(torch::randn({per_tensor}));
    Figures raw, per_tensor_raw, fusion_path, dividing_path;
    for (int it = -2; it < iterations; ++it) {  // two warm-up rounds
      dist.world()->Barrier();
      auto start = Clock::now();
      dist.world()->AllreduceSum(flat);
      double raw_s = Seconds(start);
      dist.world()->Barrier();
      start = Clock::now();
      for (auto& t : separate) dist.world()->AllreduceSum(t);
      double per_tensor_s = Seconds(start);
      double fusion_s = FusionStep(source, flat_grad, params.size(), *sync, *dist.world());
      double dividing_s =
          FusionStep(source, flat_grad, params.size(), *dividing_sync, *dist.world());
      if (it < 0) continue;
      raw.seconds += raw_s / iterations;
      per_tensor_raw.seconds += per_tensor_s / iterations;
      fusion_path.seconds += fusion_s / iterations;
      dividing_path.seconds += dividing_s / iterations;
    }
    int n = dist.world_size();
    double bus = 2.0 * (n - 1) / n;
    if (dist.rank() == 0) {
      std::printf("ranks %d, %.1f MiB in %lld tensors, fusion threshold %lld MiB, %d iterations\n",
                  n, bytes / 1048576.0, static_cast<long long>(tensors),
                  static_cast<long long>(fusion_mib), iterations);
      std::printf("raw c10d allreduce:   %8.2f ms  algbw %6.3f GB/s  busbw %6.3f GB/s\n",
                  raw.seconds * 1e3, raw.algbw_gbs(bytes), raw.algbw_gbs(bytes) * bus);
      std::printf("raw, one per tensor:  %8.2f ms  algbw %6.3f GB/s  busbw %6.3f GB/s\n",
                  per_tensor_raw.seconds * 1e3, per_tensor_raw.algbw_gbs(bytes),
                  per_tensor_raw.algbw_gbs(bytes) * bus);
      std::printf("fusion path:          %8.2f ms  algbw %6.3f GB/s  busbw %6.3f GB/s\n",
                  fusion_path.seconds * 1e3, fusion_path.algbw_gbs(bytes),
                  fusion_path.algbw_gbs(bytes) * bus);
      std::printf(
          "fusion path, dividing: %7.2f ms  algbw %6.3f GB/s  busbw %6.3f GB/s  "
          "(averaged by a pass after the sum, not by backward's seed)\n",
          dividing_path.seconds * 1e3, dividing_path.algbw_gbs(bytes),
          dividing_path.algbw_gbs(bytes) * bus);
      std::printf(
          "fusion/raw bandwidth: %.3f of one flat allreduce (target >= 0.9), %.3f of one "
          "allreduce per tensor; dividing after the sum: %.3f\n",
          raw.seconds / fusion_path.seconds, per_tensor_raw.seconds / fusion_path.seconds,
          raw.seconds / dividing_path.seconds);
      std::printf(
          "collectives issued by the fusion path: %lld; gradient bytes reduced in place %.1f "
          "MiB, copied through a fusion buffer %.1f MiB\n",
          static_cast<long long>(sync->allreduces()), sync->bytes_in_place() / 1048576.0,
          sync->bytes_copied() / 1048576.0);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 1;
  }
}
