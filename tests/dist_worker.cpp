// One rank of a multi-process test: dist_test starts N of these with RANK/WORLD_SIZE/MASTER_*
// set, each writes what it computed to <out>/rank-R.pt, and dist_test compares.
//   dist_worker loss <global|local|nograd|nograd-local> <out> <fusion-bytes> [seeded]
//   dist_worker sync <out> <fusion-bytes> <accum-freq> <hierarchical 0|1> [flat|separate] [seeded]
// (flat: the gradients live in two flat buffers, interleaved as the trainer's optimizer groups;
// seeded: backward is seeded with 1/world size and the synchroniser only sums, as dtrain-clip
// trains)
//   dist_worker rendezvous <timeout-ms>
#include <torch/torch.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "runtime/dist/distributed.h"
#include "runtime/dist/distributed_clip_loss.h"
#include "runtime/train/flat_parameters.h"
#include "runtime/trace/timeline.h"
#include "tests/support/dist_tiny_clip.h"

namespace {

using namespace dtrain::clip;

constexpr int64_t kRowsPerRank = 6;

void Save(const std::vector<torch::Tensor>& tensors, const std::string& out, int rank) {
  torch::save(tensors, out + "/rank-" + std::to_string(rank) + ".pt");
}

// loss.backward() as dtrain-clip's trainer does it when `seeded`: seeded with 1/world size.
void Backward(const torch::Tensor& loss, bool seeded, int world) {
  if (seeded) {
    loss.backward(torch::full_like(loss, 1.0 / world));
  } else {
    loss.backward();
  }
}

int RunLoss(Distributed& dist, const std::string& mode, const std::string& out, int64_t fusion,
            bool seeded) {
  testing::TinyClip model;
  GradientSyncOptions sync_options;
  sync_options.fusion_threshold_bytes = fusion;
  sync_options.gradients_prescaled = seeded;
  auto sync = dist.MakeGradientSync(testing::NamedParameters(model), sync_options);
  auto [images, texts] = testing::GlobalBatch(kRowsPerRank * dist.world_size());
  auto mine = [&](const torch::Tensor& t) {
    return t.narrow(0, dist.rank() * kRowsPerRank, kRowsPerRank);
  };
  auto [image_f, text_f] = model->forward(mine(images), mine(texts));
  ClipLossOptions loss_options;
  loss_options.gather_with_grad = mode == "global" || mode == "local";
  loss_options.local_loss = mode == "local" || mode == "nograd-local";
  torch::Tensor loss =
      ClipLossAcrossRanks(image_f, text_f, model->logit_scale.exp(), dist.world(), loss_options);
  Backward(loss, seeded, dist.world_size());
  sync->Synchronize();
  std::vector<torch::Tensor> grads;
  for (auto& p : model->parameters()) grads.push_back(p.grad());
  Save(grads, out, dist.rank());
  return 0;
}

// Parameters whose gradients are rank-specific random tensors: the synchronised result must be
// their mean over ranks, as a direct allreduce of the same tensors computes it. Saves, per
// tensor, the result and the expected mean, then [allreduces, bytes in place, bytes copied,
// tensors whose .grad is still a view of the flat buffer]; the timeline goes to <out>.
int RunSync(Distributed& dist, const std::string& out, int64_t fusion, int accum, bool flat,
            bool seeded) {
  std::vector<int64_t> sizes = {1, 100, 1000, 5000, 3, 20000, 17, 4096};
  std::vector<std::pair<std::string, torch::Tensor>> params;
  std::vector<std::vector<torch::Tensor>> groups(2);
  for (size_t i = 0; i < sizes.size(); ++i) {
    params.emplace_back("p" + std::to_string(i), torch::zeros({sizes[i]}).requires_grad_());
    groups[i % 2].push_back(params.back().second);
  }
  std::unique_ptr<FlatParameters> flat_params;
  if (flat) flat_params = std::make_unique<FlatParameters>(groups);
  GlobalTimeline().Open(out + "/timeline-" + std::to_string(dist.rank()) + ".json", dist.rank(),
                        "localhost", false);
  GradientSyncOptions sync_options;
  sync_options.fusion_threshold_bytes = fusion;
  sync_options.gradients_prescaled = seeded;
  auto sync = dist.MakeGradientSync(params, sync_options);
  torch::manual_seed(100 + dist.rank());
  std::vector<torch::Tensor> expected;
  for (auto& [name, p] : params) expected.push_back(torch::zeros_like(p));
  for (int micro = 0; micro < accum; ++micro) {
    sync->SetSyncEnabled(micro == accum - 1);
    torch::Tensor loss = torch::zeros({});
    for (size_t i = 0; i < params.size(); ++i) {
      torch::Tensor g = torch::randn_like(params[i].second);
      expected[i] += g;
      loss = loss + (params[i].second * g).sum();
    }
    Backward(loss, seeded, dist.world_size());
  }
  sync->Synchronize();
  GlobalTimeline().Close();
  std::vector<torch::Tensor> saved;
  int64_t views = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    dist.world()->AllreduceSum(expected[i]);
    saved.push_back(params[i].second.grad());
    saved.push_back(expected[i] / dist.world_size());
    if (flat_params) {
      const torch::Tensor& buffer = flat_params->buffers()[i % 2].grad();
      const char* begin = static_cast<const char*>(buffer.data_ptr());
      const char* at = static_cast<const char*>(params[i].second.grad().data_ptr());
      views += at >= begin && at < begin + buffer.nbytes() ? 1 : 0;
    }
  }
  saved.push_back(
      torch::tensor({sync->allreduces(), sync->bytes_in_place(), sync->bytes_copied(), views}));
  Save(saved, out, dist.rank());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    DistEnv env = ReadDistEnvFromProcess();
    DistributedOptions options;
    options.backend = "gloo";
    if (args.at(0) == "rendezvous") {
      options.rendezvous_timeout = std::chrono::milliseconds(std::stoll(args.at(1)));
      Distributed dist(env, options);
      std::printf("rank %d arrived; clock offset %lld us\n", env.rank,
                  static_cast<long long>(dist.rendezvous().clock_offset_us));
      return 0;
    }
    if (args.at(0) == "loss") {
      Distributed dist(env, options);
      return RunLoss(dist, args.at(1), args.at(2), std::stoll(args.at(3)),
                     args.size() > 4 && args.at(4) == "seeded");
    }
    if (args.at(0) == "sync") {
      options.hierarchical_allreduce = args.at(4) == "1";
      Distributed dist(env, options);
      return RunSync(dist, args.at(1), std::stoll(args.at(2)), std::stoi(args.at(3)),
                     args.size() > 5 && args.at(5) == "flat",
                     args.size() > 6 && args.at(6) == "seeded");
    }
    std::fprintf(stderr, "dist_worker: unknown scenario %s\n", args.at(0).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_worker: %s\n", e.what());
    return 1;
  }
}
