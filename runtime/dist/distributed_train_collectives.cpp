#include "runtime/dist/distributed_train_collectives.h"

#include <algorithm>
#include <cstdlib>

#include <unistd.h>

#include <exception>

#include "runtime/dist/distributed_clip_loss.h"
#include "runtime/dist/rank_device.h"

namespace dtrain::clip {
namespace {

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

DistributedOptions DistributedOptionsFor(const TrainOptions& options) {
  DistributedOptions dist;
  dist.backend = options.dist_backend;
  if (dist.backend.empty()) dist.backend = options.device.rfind("cuda", 0) == 0 ? "nccl" : "gloo";
  dist.hierarchical_allreduce = options.hierarchical_allreduce;
  // Under `dtrain launch --stall-timeout S` a collective fails after 2 S (the launcher's stall
  // report comes first, at S, while every process is still there to be looked at).
  if (const char* stall = std::getenv("DTRAIN_STALL_TIMEOUT"); stall && std::atof(stall) > 0) {
    dist.collective_timeout = std::chrono::milliseconds(
        static_cast<int64_t>(std::max(10.0, 2 * std::atof(stall)) * 1000));
  }
  return dist;
}

GradientSyncOptions SyncOptionsFor(const TrainOptions& options) {
  GradientSyncOptions sync = GradientSyncOptionsFromEnvironment();
  if (options.fusion_threshold_mb >= 0) {
    sync.fusion_threshold_bytes = static_cast<int64_t>(options.fusion_threshold_mb * (1 << 20));
  }
  if (options.cycle_time_ms >= 0) sync.cycle_time_ms = options.cycle_time_ms;
  sync.gradients_prescaled = true;  // backward is seeded with BackwardSeed() = 1/world size
  return sync;
}

}  // namespace

DistributedTrainCollectives::DistributedTrainCollectives(const DistEnv& env,
                                                         const TrainOptions& options)
    : dist_(std::make_unique<Distributed>(env, DistributedOptionsFor(options))),
      collective_device_(dist_->backend() == "nccl" ? RankDevice(options.device)
                                                    : torch::Device(torch::kCPU)),
      host_(HostName()),
      sync_options_(SyncOptionsFor(options)),
      local_loss_(options.local_loss),
      gather_with_grad_(options.gather_with_grad),
      accum_freq_(std::max(1, options.accum_freq)) {}

DistributedTrainCollectives::~DistributedTrainCollectives() {
  if (std::uncaught_exceptions() > 0) {
    (void)sync_.release();  // its thread may sit in a collective: leave it to process exit
    (void)dist_.release();
  }
}

void DistributedTrainCollectives::BroadcastParameters(
    std::vector<std::pair<std::string, torch::Tensor>>& params) {
  sync_ = dist_->MakeGradientSync(params, sync_options_);
  micro_ = 0;
  sync_->SetSyncEnabled(accum_freq_ == 1);
}

torch::Tensor DistributedTrainCollectives::Loss(const torch::Tensor& image_features,
                                                const torch::Tensor& text_features,
                                                const torch::Tensor& logit_scale) {
  ClipLossOptions loss_options;
  loss_options.gather_with_grad = gather_with_grad_;
  loss_options.local_loss = local_loss_;
  return ClipLossAcrossRanks(image_features, text_features, logit_scale, dist_->world(),
                             loss_options);
}

// Hooks send gradients during the backward of the step's last micro-batch only; the count of
// micro-batches tells in advance which backward that is. Should the loop ever disagree, the
// synchroniser still sends every accumulated gradient from Synchronize() (no overlap, same sum).
void DistributedTrainCollectives::GradientReady(const torch::Tensor& parameter) {
  if (sync_) sync_->MarkReady(parameter);
}

void DistributedTrainCollectives::AfterBackward(bool last) {
  if (static_sync_) {
    if (last) static_sync_->Run();
    return;
  }
  if (!sync_) return;
  if (last) {
    sync_->SetSyncEnabled(true);
    sync_->Synchronize();
    micro_ = 0;
  } else {
    ++micro_;
  }
  sync_->SetSyncEnabled(micro_ == accum_freq_ - 1);
}

int64_t DistributedTrainCollectives::UseStaticGradientSync(
    const std::vector<torch::Tensor>& flat_gradients) {
  sync_.reset();  // collective: its loop ends on every rank here
  static_sync_ = std::make_unique<StaticGradientSync>(flat_gradients, *dist_->world(),
                                                      sync_options_.fusion_threshold_bytes);
  return static_cast<int64_t>(static_sync_->buckets().size());
}

double DistributedTrainCollectives::SumOverRanks(double value) {
  torch::Tensor sum = torch::tensor({value}, torch::kDouble).to(collective_device_);
  dist_->world()->AllreduceSum(sum);
  return sum.item<double>();
}

namespace {

class PendingWorldSum : public PendingSum {
 public:
  explicit PendingWorldSum(std::unique_ptr<PendingCollective> work) : work_(std::move(work)) {}
  void Wait() override { work_->Wait(); }

 private:
  std::unique_ptr<PendingCollective> work_;
};

}  // namespace

// Callers make `counts` on collective_device(): a copy of CPU values to the GPU from pageable
// memory would wait for the GPU.
std::unique_ptr<PendingSum> DistributedTrainCollectives::StartSumOverRanks(torch::Tensor& counts) {
  return std::make_unique<PendingWorldSum>(dist_->world()->AllreduceSumInBackground(counts));
}

std::vector<int64_t> DistributedTrainCollectives::GatherFromRanks(int64_t value) {
  torch::Tensor all =
      dist_->world()->Allgather(torch::tensor({value}, torch::kLong).to(collective_device_)).cpu();
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
}

// In pieces of at most 256 MiB: a checkpoint of ViT-B/32 with its AdamW moments is 1.8 GB, and
// NCCL needs each piece on the GPU.
void DistributedTrainCollectives::BroadcastBytes(std::string& bytes, int root) {
  constexpr int64_t kPiece = int64_t{256} << 20;
  Communicator& world = *dist_->world();
  torch::Tensor size =
      torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kLong).to(collective_device_);
  world.Broadcast(size, root);
  const int64_t total = size.cpu().item<int64_t>();
  if (world.rank() != root) bytes.assign(static_cast<size_t>(total), '\0');
  for (int64_t at = 0; at < total; at += kPiece) {
    torch::Tensor host = torch::from_blob(bytes.data() + at, {std::min(kPiece, total - at)},
                                          torch::TensorOptions().dtype(torch::kUInt8));
    if (collective_device_.is_cpu()) {
      world.Broadcast(host, root);
      continue;
    }
    torch::Tensor piece = host.to(collective_device_);
    world.Broadcast(piece, root);
    if (world.rank() != root) host.copy_(piece.cpu());
  }
}

void DistributedTrainCollectives::Barrier() {
  dist_->world()->Barrier();
}

std::unique_ptr<TrainCollectives> MakeTrainCollectives(const TrainOptions& options) {
  DistEnv env = ReadDistEnvFromProcess();
  if (!env.distributed()) return std::make_unique<TrainCollectives>();
  return std::make_unique<DistributedTrainCollectives>(env, options);
}

}  // namespace dtrain::clip
