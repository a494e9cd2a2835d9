// AutocastScope: bfloat16 autocast on CUDA for the forward pass while alive; a no-op for fp32.
// (amp_bf16 is refused on CPU at parse time: the CPU step's own kernels are float32.)
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace dtrain::clip {

class AutocastScope {
 public:
  AutocastScope(bool enabled, const torch::Device& device) : enabled_(enabled && device.is_cuda()) {
    if (!enabled_) return;
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCUDA, true);
  }
  ~AutocastScope() {
    if (!enabled_) return;
    at::autocast::set_autocast_enabled(at::kCUDA, false);
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
};

}  // namespace dtrain::clip
