// The fashion-mnist dataset type: the training split's idx files, captions from the templates.
#include <cstring>

#include "runtime/data/distributed_sampler.h"
#include "runtime/data/fashion_mnist.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/sample_dataset.h"

namespace dtrain::clip {
namespace {

// The training split in memory (47 MB); each visit of a sample draws one template from the
// seed, the epoch and the sample id, so captions vary across epochs but not across runs.
class FashionMnistDataset : public SampleDataset {
 public:
  explicit FashionMnistDataset(const DataOptions& options)
      : split_(LoadFashionMnist(options.train_data, "train")),
        channels_(options.channels),
        size_(options.image_size),
        seed_(options.seed) {}

  int64_t Size() const override { return split_.count; }

  void Load(int64_t index, int epoch, SampleSlot slot) const override {
    constexpr size_t kPixels = kFashionMnistSide * kFashionMnistSide;
    Image image{kFashionMnistSide, kFashionMnistSide, 1, std::vector<uint8_t>(kPixels)};
    std::memcpy(image.data.data(), &split_.pixels[static_cast<size_t>(index) * kPixels], kPixels);
    WriteSample(image, channels_, size_, slot);
    slot.label = split_.labels[static_cast<size_t>(index)];
    const uint64_t draw = MixSeed(
        seed_ ^ MixSeed((static_cast<uint64_t>(epoch) << 32) ^ static_cast<uint64_t>(index)));
    slot.caption = FashionMnistCaption(slot.label, static_cast<int64_t>(draw >> 1));
  }

 private:
  FashionMnistSplit split_;
  int channels_, size_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<SampleDataset> MakeFashionMnistDataset(const DataOptions& options) {
  return std::make_unique<FashionMnistDataset>(options);
}

}  // namespace dtrain::clip
