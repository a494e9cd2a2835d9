#include "runtime/train/lr_schedule.h"

#include <cmath>

namespace dtrain::clip {

double CosineLrSchedule::At(int64_t step) const {
  if (step < warmup) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress = static_cast<double>(step - warmup);
  const double span = static_cast<double>(total_steps - warmup);
  if (span <= 0) return base_lr;
  return 0.5 * (1.0 + std::cos(M_PI * std::min(progress / span, 1.0))) * base_lr;
}

}  // namespace dtrain::clip
