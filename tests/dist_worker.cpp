// One rank of a multi-process test: dist_test starts N of these with RANK/WORLD_SIZE/MASTER_*
// set, each writes what it computed to <out>/rank-R.pt, and dist_test compares.
//   dist_worker loss <global|local|nograd|nograd-local> <out> <fusion-bytes> [seeded]
//   dist_worker sync <out> <fusion-bytes> <accum-freq> <hierarchical 0|1> [flat|separate] [seeded]
// (flat: the gradients live in two flat buffers, interleaved as the trainer's optimizer groups;
// seeded: backward is seeded with 1/world size and the synchroniser only sums, as dtrain-clip
// trains)
//   dist_worker overlap <out> <fusion-bytes> [flat|separate]
// (one step of the tiny CLIP twice from the same weights: gradients sent while backward runs,
// then all sent after it; see RunOverlap)
//   dist_worker rendezvous <timeout-ms>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <thread>
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

// Stands between a layer and the rest of the network; its backward runs once the gradients of
// everything after it are accumulated, and (when `hold`) waits there, up to 30 s, for the
// gradient sync to issue a collective. Overlap issues one before backward ends; a sync that
// sends only after backward never does, and the wait then times out and is seen as such.
struct HoldBackward : torch::autograd::Function<HoldBackward> {
  static GradientSync* sync;
  static bool hold;
  static int64_t seen;  // collectives issued when the hold ended (-1: not reached)
  static torch::Tensor forward(torch::autograd::AutogradContext*, const torch::Tensor& x) {
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (hold && sync->allreduces() == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    seen = sync->allreduces();
    return {grads[0]};
  }
};
GradientSync* HoldBackward::sync = nullptr;
bool HoldBackward::hold = false;
int64_t HoldBackward::seen = -1;

// Buckets as one tensor: each bucket's gradient indices, then -1.
torch::Tensor BucketsAsTensor(const std::vector<std::vector<size_t>>& buckets) {
  std::vector<int64_t> flat;
  for (const auto& bucket : buckets) {
    for (size_t index : bucket) flat.push_back(static_cast<int64_t>(index));
    flat.push_back(-1);
  }
  return torch::tensor(flat, torch::kLong);
}

// The same step of the tiny CLIP (global loss, features gathered with gradients, backward seeded
// with 1/world size as the trainer does) twice from the same weights: first with the gradient
// sync on during backward (buckets go out as their gradients are ready; a HoldBackward after the
// image tower's first layer waits for one to be issued), then with it off during backward and on
// only for Synchronize() afterwards (every gradient ready at once: one round, one plan).
// Saves, per parameter, the overlapped and the after-backward average, then the buckets each
// pass issued (BucketsAsTensor) and [collectives issued before the hold ended, on the first
// pass; on the second].
int RunOverlap(Distributed& dist, const std::string& out, int64_t fusion, bool flat) {
  testing::TinyClip model;
  std::unique_ptr<FlatParameters> flat_params;
  if (flat) {
    std::vector<std::vector<torch::Tensor>> groups(2);
    size_t i = 0;
    for (auto& p : model->parameters()) groups[i++ % 2].push_back(p);
    flat_params = std::make_unique<FlatParameters>(groups);
  }
  GradientSyncOptions sync_options;
  sync_options.fusion_threshold_bytes = fusion;
  sync_options.gradients_prescaled = true;
  sync_options.record_buckets = true;
  auto sync = dist.MakeGradientSync(testing::NamedParameters(model), sync_options);
  HoldBackward::sync = sync.get();
  auto [images, texts] = testing::GlobalBatch(kRowsPerRank * dist.world_size());
  auto mine = [&](const torch::Tensor& t) {
    return t.narrow(0, dist.rank() * kRowsPerRank, kRowsPerRank);
  };
  ClipLossOptions loss_options;
  loss_options.gather_with_grad = true;
  auto step = [&](bool overlap) {
    for (auto& p : model->parameters()) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    sync->SetSyncEnabled(overlap);
    HoldBackward::hold = overlap;
    HoldBackward::seen = -1;
    auto hidden = HoldBackward::apply(model->image_in(mine(images)));
    auto image = model->image_out(torch::gelu(hidden));
    auto text = model->text_out(torch::gelu(model->text_in(mine(texts))));
    torch::Tensor loss = ClipLossAcrossRanks(image / image.norm(2, -1, true),
                                             text / text.norm(2, -1, true),
                                             model->logit_scale.exp(), dist.world(), loss_options);
    Backward(loss, /*seeded=*/true, dist.world_size());
    sync->SetSyncEnabled(true);
    sync->Synchronize();
    std::vector<torch::Tensor> grads;
    for (auto& p : model->parameters()) grads.push_back(p.grad().clone());
    return grads;
  };
  std::vector<torch::Tensor> overlapped = step(true);
  const size_t first_pass = sync->buckets_issued().size();
  const int64_t seen_overlapped = HoldBackward::seen;
  std::vector<torch::Tensor> after = step(false);
  const int64_t seen_after = HoldBackward::seen - static_cast<int64_t>(first_pass);
  std::vector<std::vector<size_t>> buckets = sync->buckets_issued();
  std::vector<torch::Tensor> saved;
  for (size_t i = 0; i < overlapped.size(); ++i) {
    saved.push_back(overlapped[i]);
    saved.push_back(after[i]);
  }
  saved.push_back(BucketsAsTensor({buckets.begin(), buckets.begin() + first_pass}));
  saved.push_back(BucketsAsTensor({buckets.begin() + first_pass, buckets.end()}));
  saved.push_back(torch::tensor({seen_overlapped, seen_after}));
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
    if (args.at(0) == "overlap") {
      Distributed dist(env, options);
      return RunOverlap(dist, args.at(1), std::stoll(args.at(2)),
                        args.size() > 3 && args.at(3) == "flat");
    }
    std::fprintf(stderr, "dist_worker: unknown scenario %s\n", args.at(0).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_worker: %s\n", e.what());
    return 1;
  }
}
