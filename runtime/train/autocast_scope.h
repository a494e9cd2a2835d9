// AutocastScope: bfloat16 autocast on the step's device (CUDA, or the CPU) for the forward pass
// while alive; a no-op for fp32. On the CPU it runs the GPU step's operators (the attention
// through SDPA, bfloat16 matrix products), slowly: a CPU without bfloat16 matrix units computes
// them in software.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace dtrain::clip {

class AutocastScope {
 public:
  AutocastScope(bool enabled, const torch::Device& device)
      : enabled_(enabled && (device.is_cuda() || device.is_cpu())), type_(device.type()) {
    if (!enabled_) return;
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::set_autocast_enabled(type_, true);
  }
  ~AutocastScope() {
    if (!enabled_) return;
    at::autocast::set_autocast_enabled(type_, false);
    at::autocast::clear_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  at::DeviceType type_;
};

}  // namespace dtrain::clip
