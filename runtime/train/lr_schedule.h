// CosineLrSchedule: OpenCLIP's cosine_lr: linear warmup to the base rate over `warmup` steps,
// then a half cosine down to zero at `total_steps`. Pure arithmetic on the optimizer step.
#pragma once

#include <cstdint>

namespace dtrain::clip {

struct CosineLrSchedule {
  double base_lr = 1e-3;
  int64_t warmup = 0;
  int64_t total_steps = 1;

  // The learning rate for optimizer step `step` (0-based).
  double At(int64_t step) const;
};

}  // namespace dtrain::clip
