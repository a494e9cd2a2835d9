// WeightCopies: a bfloat16 copy of each of the model's matrix weights and their biases, which a
// bf16-autocast forward pass uses in their place (UseWeightCopy). Autocast otherwise casts each
// parameter where it is used: a cast, its kernel and a ToCopyBackward node per parameter a step
// (~200 for ViT-B/32, and as many casts back in backward). Here one multi-tensor copy refreshes
// them all, and backward hands each copy's bfloat16 gradient over for FlatParameters to convert
// into its float32 view, again in one multi-tensor copy.
//
// The numbers are autocast's, bit for bit: the same round-to-nearest cast of the same float32
// values, the same bfloat16 products, and a bfloat16 gradient widened exactly to float32. A copy
// used twice (the last text block's q and k/v rows of in_proj) has its parts added in bfloat16,
// which is exact because the parts are disjoint rows padded with zeros.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dtrain::clip {

class WeightCopies {
 public:
  // `parameters`: what the forward pass takes through UseWeightCopy; each keeps a copy of `type`.
  WeightCopies(const std::vector<torch::Tensor>& parameters, torch::ScalarType type);

  // While alive, UseWeightCopy on this thread answers with `copies` (none: a scope that does
  // nothing, the parameters used as they are), refreshed from the parameters' current values
  // when the scope opens unless `refresh` is false (an earlier scope of the same step did, and
  // the parameters have not changed since). Scopes do not nest.
  class Scope {
   public:
    explicit Scope(WeightCopies* copies, bool refresh = true);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  ~WeightCopies();
  WeightCopies(const WeightCopies&) = delete;
  WeightCopies& operator=(const WeightCopies&) = delete;

  // After backward: each copy's gradient becomes its parameter's .grad, in the copy's type
  // (FlatParameters::AdoptGradients converts it into the parameter's float32 view); added to the
  // parameter's own where the parameter was also used directly. The copies' gradients are unset.
  void HandOverGradients();

  // From now on, as backward completes each copy's gradient (a hook on its accumulator), it is
  // added into the parameter's float32 .grad at once (widened, as autocast's cast and addition
  // would; the .grad is made where there was none) and `added(parameter)` is called: for a
  // gradient sync that sends gradients while backward goes on, and for micro-batches, whose
  // gradients then add up in float32. HandOverGradients() then finds nothing left to do.
  void AddGradientsIntoParameters(std::function<void(const torch::Tensor&)> added);

  size_t size() const { return copies_.size(); }
  // The copy `parameter` is used as, or an undefined tensor.
  torch::Tensor CopyOf(const torch::Tensor& parameter) const;

 private:
  friend const torch::Tensor& UseWeightCopy(const torch::Tensor& parameter);
  void AddIntoParameter(size_t i);
  std::vector<torch::Tensor> parameters_, copies_;
  std::unordered_map<const void*, size_t> index_;  // parameter's TensorImpl -> its copy
  std::function<void(const torch::Tensor&)> added_;
  // AddGradientsIntoParameters' hooks: each copy's accumulator (kept alive) and the hook's key.
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks_;
};

// The copy of `parameter` in the scope open on this thread, or `parameter` itself (no scope, or
// not a parameter with a copy).
const torch::Tensor& UseWeightCopy(const torch::Tensor& parameter);

}  // namespace dtrain::clip
