#include "runtime/dist/bucket_plan.h"

namespace dtrain::clip {

std::vector<PlannedBucket> PlanBuckets(const std::vector<GradientSlot>& gradients,
                                       const std::vector<std::vector<size_t>>& chains,
                                       const std::vector<size_t>& ready, int64_t threshold_bytes) {
  std::vector<bool> is_ready(gradients.size(), false), in_chain(gradients.size(), false);
  for (size_t index : ready) is_ready[index] = true;
  std::vector<PlannedBucket> buckets;
  for (size_t c = 0; c < chains.size(); ++c) {
    int64_t bytes = 0;
    bool open = false;
    for (size_t index : chains[c]) {
      in_chain[index] = true;
      if (!is_ready[index]) {
        open = false;
        continue;
      }
      if (!open || threshold_bytes <= 0 || bytes + gradients[index].bytes > threshold_bytes) {
        buckets.emplace_back();
        buckets.back().chain = static_cast<int>(c);
        open = true;
        bytes = 0;
      }
      buckets.back().members.push_back(index);
      bytes += gradients[index].bytes;
    }
  }
  int64_t bytes = 0;
  bool open = false;
  for (size_t index : ready) {
    if (in_chain[index]) continue;
    const GradientSlot& slot = gradients[index];
    bool fits = open && threshold_bytes > 0 && bytes + slot.bytes <= threshold_bytes &&
                gradients[buckets.back().members.front()].fusion_key == slot.fusion_key;
    if (!fits) {
      buckets.emplace_back();
      open = true;
      bytes = 0;
    }
    buckets.back().members.push_back(index);
    bytes += slot.bytes;
  }
  return buckets;
}

}  // namespace dtrain::clip
