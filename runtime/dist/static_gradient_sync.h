// StaticGradientSync: gradient averaging a CUDA graph can hold (--cuda-graphs with more than one
// rank). GradientSync (gradient_sync.h) agrees with the other ranks on the host, on a thread of
// its own, about which gradients are ready: nothing a graph can replay. Here the buckets are cut
// once: each flat gradient buffer (FlatParameters) in pieces of at most the fusion threshold, in
// the same order on every rank. After backward, Run() starts their allreduces in place from the
// caller's thread (on CUDA: its stream, so a capture records them) and waits for all of them.
// On NCCL the collectives are captured with the step and replayed with it; on the CPU (Gloo) the
// same calls run eagerly, which is how the CPU tests check it. Backward must be seeded with
// 1/world size: the sum over ranks is then the average.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/dist/communicator.h"

namespace dtrain::clip {

struct StaticBucket {
  size_t buffer = 0;   // which flat gradient
  int64_t offset = 0;  // first element
  int64_t numel = 0;
};

// Each buffer of `numels` (elements of `element_bytes` bytes) cut into consecutive pieces of at
// most `bucket_bytes` (at least one element each); `bucket_bytes` <= 0: one piece per buffer.
// Buffers in reverse order, each from its end: backward writes the last layers' gradients first.
std::vector<StaticBucket> CutStaticBuckets(const std::vector<int64_t>& numels,
                                           const std::vector<int64_t>& element_bytes,
                                           int64_t bucket_bytes);

class StaticGradientSync {
 public:
  // `flat_gradients` keep their storage while this object lives; `comm` is the caller's (used
  // from the caller's thread only, between its other collectives).
  StaticGradientSync(std::vector<torch::Tensor> flat_gradients, Communicator& comm,
                     int64_t bucket_bytes);

  // Every flat gradient summed over ranks, in place.
  void Run();

  const std::vector<StaticBucket>& buckets() const { return buckets_; }
  int64_t runs() const { return runs_; }  // Run() calls (under a graph: captures, not replays)

 private:
  std::vector<torch::Tensor> gradients_;
  Communicator& comm_;
  std::vector<StaticBucket> buckets_;
  std::vector<torch::Tensor> views_;  // one per bucket, made once
  int64_t runs_ = 0;
};

}  // namespace dtrain::clip
