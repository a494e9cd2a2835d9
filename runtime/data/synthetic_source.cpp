// The synthetic dataset type: random pixels and random Fashion-MNIST captions, generated on the
// fly, for benchmarks that must not wait on data.
#include <algorithm>
#include <cstring>

#include "runtime/data/distributed_sampler.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/sample_dataset.h"

namespace dtrain::clip {
namespace {

// Sample i is a pure function of (seed, i): the same pixels and caption at every visit. Pixels
// come from a pool of random images made once (up to 64 MB), so a sample costs one copy.
// train_num_samples sets the size (default 60,000, one Fashion-MNIST epoch).
class SyntheticDataset : public SampleDataset {
 public:
  explicit SyntheticDataset(const DataOptions& options)
      : size_(options.train_num_samples > 0 ? options.train_num_samples : 60000),
        values_(static_cast<size_t>(options.channels) * options.image_size * options.image_size),
        seed_(options.seed) {
    const size_t images = std::clamp<size_t>((64u << 20) / (values_ * sizeof(float)), 1, 512);
    // xorshift64: floats uniform in [-2, 2), roughly the range of normalised pixels, or bytes.
    uint64_t state = MixSeed(seed_) | 1;
    auto next = [&state] {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      return state;
    };
    if (options.raw_pixels) {
      raw_pool_.resize(images * values_);
      for (uint8_t& value : raw_pool_) value = static_cast<uint8_t>(next() >> 56);
    } else {
      pool_.resize(images * values_);
      for (float& value : pool_) {
        value = static_cast<float>(next() >> 40) * (4.0f / 16777216.0f) - 2.0f;
      }
    }
  }

  int64_t Size() const override { return size_; }

  void Load(int64_t index, int, SampleSlot slot) const override {
    const uint64_t draw = MixSeed(seed_ ^ MixSeed(static_cast<uint64_t>(index)));
    slot.label = static_cast<int>(draw % kFashionMnistClasses);
    slot.caption = FashionMnistCaption(slot.label, static_cast<int64_t>((draw >> 8) & 0xffff));
    if (slot.pixels != nullptr) {
      const size_t image = (draw >> 24) % (pool_.size() / values_);
      std::memcpy(slot.pixels, &pool_[image * values_], values_ * sizeof(float));
    } else {
      const size_t image = (draw >> 24) % (raw_pool_.size() / values_);
      std::memcpy(slot.raw, &raw_pool_[image * values_], values_);
    }
  }

 private:
  int64_t size_;
  size_t values_;
  uint64_t seed_;
  std::vector<float> pool_;        // random images, values_ floats each
  std::vector<uint8_t> raw_pool_;  // or values_ bytes each (DataOptions::raw_pixels)
};

}  // namespace

std::unique_ptr<SampleDataset> MakeSyntheticDataset(const DataOptions& options) {
  return std::make_unique<SyntheticDataset>(options);
}

}  // namespace dtrain::clip
