// The bucket planner of gradient averaging: which of the gradients every rank has ready go out
// together in one collective. Pure and torch-free: it reads only what all ranks agreed on (the
// ready set, the chains) and each gradient's size and fusion key, so every rank cuts the same
// buckets in the same order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dtrain::clip {

struct GradientSlot {
  int64_t bytes = 0;
  int64_t fusion_key = 0;  // gradients fuse into one buffer only when their keys are equal
};

struct PlannedBucket {
  std::vector<size_t> members;  // gradient indices, in the order their bytes are laid out
  int chain = -1;               // >= 0: consecutive links of chains[chain], reduced in place
};

// Consecutive ready links of a chain (gradients end to end in one buffer) form in-place buckets
// up to `threshold_bytes` (a lone link is a bucket of its own: a flat buffer's gradients are
// never copied); the other ready gradients are packed into fusion buckets in index order, as
// Horovod does, a new bucket starting when the threshold or the fusion key would be crossed.
// `threshold_bytes` <= 0: one bucket per gradient. `ready` must be sorted.
std::vector<PlannedBucket> PlanBuckets(const std::vector<GradientSlot>& gradients,
                                       const std::vector<std::vector<size_t>>& chains,
                                       const std::vector<size_t>& ready, int64_t threshold_bytes);

}  // namespace dtrain::clip
