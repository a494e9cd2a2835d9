// FlatParameters: the model's parameters moved into a few contiguous buffers (one per optimizer
// group), each parameter a view into its buffer, gradients likewise. AdamW and gradient clipping
// then run a handful of large element-wise kernels instead of ~10 small ones per tensor
// (LibTorch 1.13's AdamW has no multi-tensor path). The math is unchanged, element by element.
//
// Layout (FlatLayout::kAligned, the default): in each group the parameters whose size is a
// multiple of 16 bytes come first, in the order given, then the others. Every parameter of the
// first kind then starts 16-byte aligned, as ATen's vectorised kernels require of their pointers
// (LayerNorm's weight and bias among them). In the model's own order (kModelOrder, what
// checkpoints before the layout was recorded hold) the 1-element logit_scale comes first and
// puts every later parameter of its group 4 bytes off. FromModelOrder() converts a flat tensor
// (an optimizer moment) from that order to this one.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace dtrain::clip {

enum class FlatLayout : int64_t {
  kModelOrder = 1,  // the parameters end to end in the order given
  kAligned = 2,     // those of a multiple of 16 bytes first, then the rest
};

class FlatParameters {
 public:
  // groups[g]: the parameters of optimizer group g. Parameters keep their identity (hooks,
  // names); only their storage moves. Update them in place (copy_), never with set_data.
  explicit FlatParameters(const std::vector<std::vector<torch::Tensor>>& groups,
                          FlatLayout layout = FlatLayout::kAligned);

  // What the optimizer steps: one flat tensor per group, .grad() set to the flat gradient.
  const std::vector<torch::Tensor>& buffers() const { return buffers_; }
  FlatLayout layout() const { return layout_; }
  // Zeroes every gradient in place (one kernel per group): what a captured step needs, whose
  // gradients must keep their addresses.
  void ZeroGrad();
  // Unsets every parameter's .grad instead (no kernel): backward then hands each gradient over
  // as autograd made it, where into a zeroed view it would add it (a kernel per parameter, ~300
  // a ViT-B/32 step), and AdoptGradients() gathers them in a few multi-tensor copies.
  void ReleaseGradients();
  // After backward: a parameter whose .grad is not its view (handed over by autograd, replaced
  // by an averaged tensor, or a bfloat16 gradient from WeightCopies, converted) has it copied
  // into the view, and one without a gradient a zeroed view, so the flat gradient is complete;
  // every .grad is its view again. Cheap when nothing changed.
  void AdoptGradients();
  // `flat`, group `group`'s values laid out in the given order (kModelOrder), laid out as the
  // buffer is. Returned as is when the two layouts agree.
  torch::Tensor FromModelOrder(size_t group, const torch::Tensor& flat) const;
  // The moments of `optimizer` (stepping buffers()) from kModelOrder into this layout: for a
  // checkpoint written before the layout changed.
  void MomentsFromModelOrder(torch::optim::AdamW& optimizer) const;

 private:
  struct Place {
    int64_t model_offset, offset, numel;  // in the given order; in the buffer
  };
  FlatLayout layout_;
  std::vector<torch::Tensor> buffers_, grads_;
  std::vector<std::pair<torch::Tensor, torch::Tensor>> views_;  // parameter, its gradient view
  std::vector<std::vector<Place>> places_;                      // per group, in the given order
};

// LibTorch's AdamW over `flat`'s two buffers, grouped as WeightDecayGroups() groups them: the
// first (gains, biases, logit_scale) without weight decay, the second with `weight_decay`.
std::unique_ptr<torch::optim::AdamW> MakeFlatAdamW(const FlatParameters& flat,
                                                   const torch::optim::AdamWOptions& options,
                                                   double weight_decay);

}  // namespace dtrain::clip
