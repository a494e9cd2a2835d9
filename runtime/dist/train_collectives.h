// TrainCollectives: the points where the training loop talks to other ranks. The base class is
// the single-process behaviour (rank 0 of 1, nothing to exchange); the distributed runtime
// overrides it, so the loop reads the same with one rank or many.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/model/clip_loss.h"

namespace dtrain::clip {

// A sum over ranks in flight (TrainCollectives::StartSumOverRanks); done when Wait() returns.
class PendingSum {
 public:
  virtual ~PendingSum() = default;
  virtual void Wait() {}
};

class TrainCollectives {
 public:
  virtual ~TrainCollectives() = default;
  virtual int rank() const { return 0; }
  virtual int world_size() const { return 1; }
  virtual std::string host() const { return ""; }
  virtual std::string backend() const { return ""; }  // "gloo" or "nccl" when distributed
  // Where the world's collectives take their tensors: the rank's GPU under NCCL, else the CPU.
  virtual torch::Device collective_device() const { return torch::Device(torch::kCPU); }

  // Once, before training (after a resume): make every rank start from rank 0's weights.
  virtual void BroadcastParameters(std::vector<std::pair<std::string, torch::Tensor>>& params) {
    (void)params;
  }
  // The contrastive loss of this rank's features (gathering other ranks' when distributed).
  virtual torch::Tensor Loss(const torch::Tensor& image_features,
                             const torch::Tensor& text_features, const torch::Tensor& logit_scale) {
    return ContrastiveLoss(image_features, text_features, logit_scale);
  }
  // What backward is seeded with (loss.backward(seed)): 1/world size when distributed, so that
  // the gradient sync only has to sum and the sum is the average, with no pass that divides.
  virtual double BackwardSeed() const { return 1.0; }
  // After each micro-batch's backward; `last` is true for the final one of an --accum-freq
  // step, after which gradients must hold the average over ranks (before the optimizer step).
  virtual void AfterBackward(bool last) { (void)last; }
  // During backward: `parameter`'s .grad was completed outside autograd (WeightCopies added its
  // bfloat16 copy's gradient into it), so the gradient sync may send it now.
  virtual void GradientReady(const torch::Tensor& parameter) { (void)parameter; }
  // From now on (collective, at the same point on every rank) gradients are averaged after
  // backward by a fixed sequence of in-place allreduces over these flat gradients, from the
  // calling thread: what a CUDA graph can capture (static_gradient_sync.h). Returns how many
  // collectives each step issues (0 with one rank).
  virtual int64_t UseStaticGradientSync(const std::vector<torch::Tensor>& flat_gradients) {
    (void)flat_gradients;
    return 0;
  }
  // Sum of `value` over ranks (metrics such as skipped samples); identity with one rank.
  virtual double SumOverRanks(double value) { return value; }
  // Starts summing `counts` (int64, on collective_device()) over ranks in place and returns at
  // once; collective, in the same order on every rank as the others. After Wait(): on the CPU
  // the sums are in `counts`; under NCCL the current stream waits for them and the host does
  // not, so a copy queued after it holds them (stop_agreement.h). Not reported to the heartbeat.
  // With one rank, `counts` as it is.
  virtual std::unique_ptr<PendingSum> StartSumOverRanks(torch::Tensor& counts) {
    (void)counts;
    return std::make_unique<PendingSum>();
  }
  // Every rank's `value`, in rank order (collective); {value} with one rank.
  virtual std::vector<int64_t> GatherFromRanks(int64_t value) { return {value}; }
  // Rank `root`'s `bytes` on every rank (collective; a checkpoint's file at a resume); unchanged
  // with one rank.
  virtual void BroadcastBytes(std::string& bytes, int root) {
    (void)bytes;
    (void)root;
  }
  // Every rank waits here (around checkpoints and evaluation).
  virtual void Barrier() {}
};

}  // namespace dtrain::clip
