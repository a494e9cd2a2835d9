// Batches from a SampleDataset: sampler ids -> batches -> loader threads -> ordered queue.
#include <iostream>
#include <unordered_set>

#include "runtime/data/distributed_sampler.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/prefetch_queue.h"
#include "runtime/data/sample_dataset.h"

namespace dtrain::clip {

void WriteSample(const Image& image, int channels, int size, SampleSlot& slot) {
  if (slot.pixels != nullptr) {
    ImageToModelInput(image, channels, size, slot.pixels);
  } else {
    ImageToModelBytes(image, channels, size, slot.raw);
  }
}

void BadSampleLog::Report(const std::string& what) {
  if (!skip_) {
    throw std::runtime_error(what + " (bad data is fatal: --bad-data skip would skip it)");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!reported_.insert(what).second) return;
  const int64_t count = ++count_;
  std::cerr << "dtrain-clip: skipped bad sample: " << what << " (" << count << " skipped so far)"
            << std::endl;
}

namespace {

// Sample ids known to be bad, so each is reported once and later passed over quietly.
class BadIds {
 public:
  bool Contains(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    return ids_.count(id) > 0;
  }
  bool Insert(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    return ids_.insert(id).second;
  }

 private:
  std::mutex mutex_;
  std::unordered_set<int64_t> ids_;
};

// The BatchSource contract over a SampleDataset (see MakeIndexedBatchSource).
class IndexedBatchSource : public BatchSource {
 public:
  IndexedBatchSource(std::shared_ptr<const SampleDataset> dataset, const DataOptions& options,
                     std::shared_ptr<BadSampleLog> bad_log)
      : dataset_(std::move(dataset)),
        options_(options),
        sampler_(SamplerOptionsFor(*dataset_, options)),
        bad_log_(std::move(bad_log)) {
    if (options.batch_size < 1) throw std::runtime_error("batch size must be at least 1");
    const int64_t n = sampler_.SamplesPerRank();
    batches_ = BatchesFor(n);
    if (batches_ == 0) {
      throw std::runtime_error(
          "data: " + std::to_string(n) + " samples per rank make no batch of " +
          std::to_string(options.batch_size) + " with drop-last; lower the batch size");
    }
  }
  ~IndexedBatchSource() override { prefetcher_.Stop(); }

  void StartEpoch(int epoch) override { ResumeEpoch(epoch, 0); }

  int64_t ResumeEpoch(int epoch, int64_t consumed) override {
    prefetcher_.Stop();
    epoch_ = epoch;
    ids_ = std::make_shared<const std::vector<int64_t>>(sampler_.EpochIndices(epoch, consumed));
    started_ = true;
    const int64_t batches = BatchesFor(static_cast<int64_t>(ids_->size()));
    const int workers = std::max(1, options_.workers);
    prefetcher_.Start(workers, options_.prefetch,
                      [this, workers, batches](int w, const auto& emit) {
                        for (int64_t b = w; b < batches; b += workers) {
                          HostBatch batch = prefetcher_.Spare();
                          LoadBatch(b, batch);
                          if (!emit(std::move(batch))) return;
                        }
                      });
    return batches;
  }

  bool Next(HostBatch& batch) override {
    if (!started_) StartEpoch(0);
    return prefetcher_.Next(batch);
  }

  int64_t BatchesPerEpoch() const override { return batches_; }
  int64_t SkippedSamples() const override { return bad_log_->Count(); }

 private:
  // Batches in `samples` ids of this rank: a last partial one only without drop-last.
  int64_t BatchesFor(int64_t samples) const {
    const int64_t size = options_.batch_size;
    return options_.drop_last ? samples / size : (samples + size - 1) / size;
  }

  static DistributedSampler::Options SamplerOptionsFor(const SampleDataset& dataset,
                                                       const DataOptions& options) {
    DistributedSampler::Options s;
    s.dataset_size = dataset.Size();
    s.rank = options.rank;
    s.world_size = options.world_size;
    s.seed = options.seed;
    s.drop_last = options.drop_last;
    s.num_samples = options.train_num_samples;
    return s;
  }

  void LoadBatch(int64_t b, HostBatch& batch) {
    const std::vector<int64_t>& ids = *ids_;
    const int64_t n = static_cast<int64_t>(ids.size());
    const int64_t begin = b * options_.batch_size;
    const int64_t size = std::min<int64_t>(options_.batch_size, n - begin);
    const size_t sample =
        static_cast<size_t>(options_.channels) * options_.image_size * options_.image_size;
    batch.size = size;
    batch.channels = options_.channels;
    batch.height = batch.width = options_.image_size;
    const bool raw = options_.raw_pixels;
    if (raw) {
      batch.pixels.clear();
      batch.raw_pixels.resize(static_cast<size_t>(size) * sample);
    } else {
      batch.raw_pixels.clear();
      batch.pixels.resize(static_cast<size_t>(size) * sample);
    }
    batch.captions.assign(static_cast<size_t>(size), std::string());
    batch.labels.assign(static_cast<size_t>(size), -1);
    batch.indices.assign(static_cast<size_t>(size), -1);
    for (int64_t i = 0; i < size; ++i) {
      const size_t at = static_cast<size_t>(i) * sample;
      SampleSlot slot{raw ? nullptr : &batch.pixels[at], raw ? &batch.raw_pixels[at] : nullptr,
                      batch.captions[static_cast<size_t>(i)], batch.labels[static_cast<size_t>(i)]};
      batch.indices[static_cast<size_t>(i)] = LoadUsable(ids, begin + i, slot);
    }
  }

  // Loads the sample at `position`, or the first usable one after it (cyclically); returns its id.
  int64_t LoadUsable(const std::vector<int64_t>& ids, int64_t position, SampleSlot slot) {
    const int64_t n = static_cast<int64_t>(ids.size());
    for (int64_t k = 0; k < n; ++k) {
      const int64_t id = ids[static_cast<size_t>((position + k) % n)];
      if (bad_ids_.Contains(id)) continue;
      try {
        dataset_->Load(id, epoch_, slot);
        return id;
      } catch (const BadSample& bad) {
        if (bad_ids_.Insert(id)) bad_log_->Report(bad.what());
      }
    }
    throw std::runtime_error("data: none of this rank's " + std::to_string(n) +
                             " samples could be loaded (see the errors above)");
  }

  std::shared_ptr<const SampleDataset> dataset_;
  DataOptions options_;
  DistributedSampler sampler_;
  std::shared_ptr<BadSampleLog> bad_log_;
  BadIds bad_ids_;
  int64_t batches_ = 0;
  int epoch_ = 0;
  bool started_ = false;
  std::shared_ptr<const std::vector<int64_t>> ids_;
  BatchPrefetcher prefetcher_;  // last: its threads stop before the members they use go away
};

}  // namespace

std::unique_ptr<BatchSource> MakeIndexedBatchSource(std::shared_ptr<const SampleDataset> dataset,
                                                    const DataOptions& options,
                                                    std::shared_ptr<BadSampleLog> bad_log) {
  return std::make_unique<IndexedBatchSource>(std::move(dataset), options, std::move(bad_log));
}

}  // namespace dtrain::clip
