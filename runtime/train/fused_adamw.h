// FusedAdamW: the AdamW step as ATen's fused kernel (at::_fused_adamw_, one kernel per group),
// with the learning rate and the step counts held in tensors on the parameters' device. A CUDA
// graph can hold that step: nothing in it reads a host number that changes from step to step
// (torch::optim::AdamW keeps the step count on the host and bakes lr and bias corrections into
// each launch). It works on the moment tensors of an existing torch::optim::AdamW, so
// checkpoints stay that optimizer's; SyncStepCounts() writes the counts back before a save.
// The math is AdamW's; the rounding is the fused kernel's (close to, not bit-equal with,
// torch::optim::AdamW).
#pragma once

#include <torch/torch.h>

#include <vector>

namespace dtrain::clip {

class FusedAdamW {
 public:
  // Every group of `optimizer` (whose parameters must have gradients once Step runs) is stepped
  // with its own betas, eps and weight decay; moments the optimizer has not created yet are
  // created here (zeros), as its first step would.
  explicit FusedAdamW(torch::optim::AdamW& optimizer);

  // One step with learning rate `lr`: a 0-d float tensor on the parameters' device (a captured
  // step reads it from there, so filling it changes the rate of the next replay).
  void Step(const torch::Tensor& lr);
  // Copies the device step counts into the optimizer's state (a host read: call it outside a
  // captured region, e.g. before saving a checkpoint).
  void SyncStepCounts();

  // Every tensor Step reads or writes, for tests that check a captured step's buffers stay put.
  std::vector<torch::Tensor> StateTensors() const;

 private:
  struct Group {
    std::vector<torch::Tensor> params, exp_avgs, exp_avg_sqs, steps;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  };
  torch::optim::AdamW& optimizer_;
  std::vector<Group> groups_;
};

}  // namespace dtrain::clip
