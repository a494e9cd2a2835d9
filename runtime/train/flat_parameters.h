// FlatParameters: the model's parameters moved into a few contiguous buffers (one per optimizer
// group), each parameter a view into its buffer, gradients likewise. AdamW and gradient clipping
// then run a handful of large element-wise kernels instead of ~10 small ones per tensor
// (LibTorch 1.13's AdamW has no multi-tensor path). The math is unchanged, element by element.
#pragma once

#include <torch/torch.h>

#include <utility>
#include <vector>

namespace dtrain::clip {

class FlatParameters {
 public:
  // groups[g]: the parameters of optimizer group g. Parameters keep their identity (hooks,
  // names); only their storage moves. Update them in place (copy_), never with set_data.
  explicit FlatParameters(const std::vector<std::vector<torch::Tensor>>& groups);

  // What the optimizer steps: one flat tensor per group, .grad() set to the flat gradient.
  const std::vector<torch::Tensor>& buffers() const { return buffers_; }
  // Zeroes every gradient (one kernel per group).
  void ZeroGrad();
  // After backward: a parameter whose .grad was replaced (e.g. by an averaged tensor) has it
  // copied back into its view, so the flat gradient is complete. Cheap when nothing changed.
  void AdoptGradients();

 private:
  std::vector<torch::Tensor> buffers_, grads_;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> views_;  // parameter, its gradient view
};

}  // namespace dtrain::clip
