#include "runtime/data/distributed_sampler.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace dtrain::clip {

uint64_t MixSeed(uint64_t value) {
  uint64_t z = value + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  uint64_t state = seed;
  for (int64_t i = n - 1; i > 0; --i) {
    // Unbiased draw in [0, i] by rejection.
    const uint64_t bound = static_cast<uint64_t>(i) + 1;
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t draw;
    do {
      state += 0x9e3779b97f4a7c15ull;
      draw = MixSeed(state);
    } while (draw >= limit);
    std::swap(ids[static_cast<size_t>(i)], ids[static_cast<size_t>(draw % bound)]);
  }
  return ids;
}

DistributedSampler::DistributedSampler(const Options& options) : options_(options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    throw std::invalid_argument("sampler: rank " + std::to_string(options.rank) +
                                " is not in [0, world size " + std::to_string(options.world_size) +
                                ")");
  }
  if (options.dataset_size <= 0) throw std::invalid_argument("sampler: the dataset is empty");
  epoch_size_ = options.num_samples > 0 && options.num_samples < options.dataset_size
                    ? options.num_samples
                    : options.dataset_size;
  if (SamplesPerRank() == 0) {
    throw std::invalid_argument(
        "sampler: " + std::to_string(epoch_size_) + " samples cannot give each of " +
        std::to_string(options.world_size) + " ranks one sample with drop-last");
  }
}

int64_t DistributedSampler::SamplesPerRank(int64_t consumed) const {
  const int64_t left = epoch_size_ - std::clamp<int64_t>(consumed, 0, epoch_size_);
  const int64_t world = options_.world_size;
  return options_.drop_last ? left / world : (left + world - 1) / world;
}

std::vector<int64_t> DistributedSampler::EpochIndices(int epoch, int64_t consumed) const {
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = SeededPermutation(options_.dataset_size,
                              MixSeed(options_.seed ^ MixSeed(static_cast<uint64_t>(epoch))));
  } else {
    order.resize(static_cast<size_t>(options_.dataset_size));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  order.resize(static_cast<size_t>(epoch_size_));
  consumed = std::clamp<int64_t>(consumed, 0, epoch_size_);
  order.erase(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(consumed));
  const int64_t left = epoch_size_ - consumed;
  const int64_t per_rank = SamplesPerRank(consumed);
  const int64_t total = per_rank * options_.world_size;
  for (int64_t i = left; i < total; ++i) {
    order.push_back(order[static_cast<size_t>((i - left) % left)]);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  for (int64_t i = options_.rank; i < total; i += options_.world_size) {
    mine.push_back(order[static_cast<size_t>(i)]);
  }
  return mine;
}

}  // namespace dtrain::clip
