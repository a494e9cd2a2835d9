#include "runtime/dist/static_gradient_sync.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace dtrain::clip {

std::vector<StaticBucket> CutStaticBuckets(const std::vector<int64_t>& numels,
                                           const std::vector<int64_t>& element_bytes,
                                           int64_t bucket_bytes) {
  std::vector<StaticBucket> buckets;
  for (size_t b = numels.size(); b-- > 0;) {
    const int64_t numel = numels[b];
    const int64_t per_bucket =
        bucket_bytes <= 0 ? numel : std::max<int64_t>(1, bucket_bytes / element_bytes.at(b));
    for (int64_t end = numel; end > 0;) {
      const int64_t begin = std::max<int64_t>(0, end - per_bucket);
      buckets.push_back({b, begin, end - begin});
      end = begin;
    }
  }
  return buckets;
}

StaticGradientSync::StaticGradientSync(std::vector<torch::Tensor> flat_gradients,
                                       Communicator& comm, int64_t bucket_bytes)
    : gradients_(std::move(flat_gradients)), comm_(comm) {
  std::vector<int64_t> numels, element_bytes;
  for (const torch::Tensor& g : gradients_) {
    if (!g.defined() || g.dim() != 1 || !g.is_contiguous()) {
      throw std::logic_error("static gradient sync: expected contiguous flat gradients");
    }
    numels.push_back(g.numel());
    element_bytes.push_back(static_cast<int64_t>(g.element_size()));
  }
  buckets_ = CutStaticBuckets(numels, element_bytes, bucket_bytes);
  for (const StaticBucket& bucket : buckets_) {
    views_.push_back(gradients_[bucket.buffer].narrow(0, bucket.offset, bucket.numel));
  }
}

void StaticGradientSync::Run() {
  ++runs_;
  std::vector<std::unique_ptr<PendingCollective>> pending;
  pending.reserve(views_.size());
  for (torch::Tensor& view : views_) pending.push_back(comm_.AllreduceSumAsync(view));
  for (auto& collective : pending) collective->Wait();
}

}  // namespace dtrain::clip
