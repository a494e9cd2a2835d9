// DistributedTrainCollectives: the training loop's collectives (runtime/dist/train_collectives.h)
// over real ranks: rank 0's weights broadcast at start, the loss over features gathered from every
// rank, gradients averaged Horovod-style while backward runs, sums and barriers for metrics.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/train_options.h"
#include "runtime/dist/distributed.h"
#include "runtime/dist/static_gradient_sync.h"
#include "runtime/dist/train_collectives.h"

namespace dtrain::clip {

class DistributedTrainCollectives : public TrainCollectives {
 public:
  // Collective: rendezvous with every rank of `env`.
  DistributedTrainCollectives(const DistEnv& env, const TrainOptions& options);
  // Collective at the end of training. While an exception unwinds (this rank failed), the other
  // ranks will never join: the communicators are abandoned so the process can exit and the
  // launcher can stop the job, instead of waiting for peers that are not coming.
  ~DistributedTrainCollectives() override;

  int rank() const override { return dist_->rank(); }
  int world_size() const override { return dist_->world_size(); }
  std::string host() const override { return host_; }
  std::string backend() const override { return dist_->backend(); }
  torch::Device collective_device() const override { return collective_device_; }

  void BroadcastParameters(std::vector<std::pair<std::string, torch::Tensor>>& params) override;
  torch::Tensor Loss(const torch::Tensor& image_features, const torch::Tensor& text_features,
                     const torch::Tensor& logit_scale) override;
  double BackwardSeed() const override { return 1.0 / dist_->world_size(); }
  void AfterBackward(bool last) override;
  void GradientReady(const torch::Tensor& parameter) override;
  int64_t UseStaticGradientSync(const std::vector<torch::Tensor>& flat_gradients) override;
  double SumOverRanks(double value) override;
  std::unique_ptr<PendingSum> StartSumOverRanks(torch::Tensor& counts) override;
  std::vector<int64_t> GatherFromRanks(int64_t value) override;
  void BroadcastBytes(std::string& bytes, int root) override;
  void Barrier() override;

 private:
  std::unique_ptr<Distributed> dist_;
  // Where the world communicator's tensors live: the rank's GPU for NCCL, else the CPU.
  torch::Device collective_device_;
  std::string host_;
  GradientSyncOptions sync_options_;
  bool local_loss_, gather_with_grad_;
  int accum_freq_;
  int micro_ = 0;  // micro-batches of the current step already backpropagated
  std::unique_ptr<GradientSync> sync_;
  std::unique_ptr<StaticGradientSync> static_sync_;  // replaces sync_ under --cuda-graphs
};

// One process (WORLD_SIZE unset or 1): the plain TrainCollectives; otherwise the distributed one.
// --dist-backend defaults to nccl for a CUDA --device, gloo otherwise.
std::unique_ptr<TrainCollectives> MakeTrainCollectives(const TrainOptions& options);

}  // namespace dtrain::clip
