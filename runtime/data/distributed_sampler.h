// Splits a dataset's sample ids across ranks for one epoch: every rank gets the same number,
// the ranks' shares are disjoint (up to the padding repeats), and the order is reshuffled each
// epoch from a seed all ranks share. Rank and world size are explicit, never a global state.
#pragma once

#include <cstdint>
#include <vector>

namespace dtrain::clip {

// PyTorch's DistributedSampler contract with explicit rank/world size: the epoch's permutation of
// 0..N-1 (or its first num_samples) is cut to a multiple of world_size (drop_last) or padded by
// repeating its head, and rank r takes every world_size-th id from position r.
class DistributedSampler {
 public:
  struct Options {
    int64_t dataset_size = 0;
    int rank = 0, world_size = 1;
    uint64_t seed = 0;
    bool shuffle = true;
    bool drop_last = true;    // false: pad by repeating samples so no sample is lost
    int64_t num_samples = 0;  // > 0: use only this many samples per epoch (all ranks together)
  };
  // Throws std::invalid_argument on a rank outside [0, world_size) or an empty dataset.
  explicit DistributedSampler(const Options& options);

  // This rank's sample ids for `epoch`, in the order to visit them. `consumed` > 0 resumes the
  // epoch mid-way: the first `consumed` ids of the epoch's global order (trained on by all ranks,
  // perhaps of another world size) are passed over and only the rest is padded/cut and split, so
  // no id is skipped or repeated across the restart.
  std::vector<int64_t> EpochIndices(int epoch, int64_t consumed = 0) const;
  // How many ids EpochIndices returns (the same on every rank).
  int64_t SamplesPerRank(int64_t consumed = 0) const;

 private:
  Options options_;
  int64_t epoch_size_ = 0;  // samples taken from the permutation before padding/cutting
};

// A portable Fisher-Yates permutation of 0..n-1 from splitmix64: the same on every platform and
// standard library, so ranks built with different compilers still agree.
std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed);

// splitmix64: a fast, well-mixed 64-bit hash used to derive per-epoch/per-sample random streams.
uint64_t MixSeed(uint64_t value);

}  // namespace dtrain::clip
