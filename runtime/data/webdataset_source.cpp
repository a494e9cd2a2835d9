// The webdataset type: tar shards whose members are grouped into samples by key
// ("000123.png" + "000123.txt" [+ "000123.cls"]), read by loader threads that each own a share
// of this rank's shards, shuffled through a buffer and decoded as they leave it.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <random>

#include "runtime/data/distributed_sampler.h"
#include "runtime/data/image_codec.h"
#include "runtime/data/prefetch_queue.h"
#include "runtime/data/sample_dataset.h"
#include "runtime/data/shard_list.h"
#include "runtime/data/tar_archive.h"

namespace dtrain::clip {
namespace {

// A sample as it comes out of a shard, still encoded (cheap to hold in the shuffle buffer).
struct EncodedSample {
  std::string where;  // shard:key, for errors
  std::string image_name;
  std::vector<uint8_t> image;
  std::string caption;
  int label = -1;
  bool has_caption = false;
};

// Splits "dir/000123.seg.png" into key "dir/000123" and extension "seg.png" (WebDataset's rule:
// the first dot of the last path component).
void SplitKey(const std::string& name, std::string& key, std::string& extension) {
  const size_t slash = name.rfind('/');
  const size_t dot = name.find('.', slash == std::string::npos ? 0 : slash + 1);
  key = name.substr(0, dot);
  extension = dot == std::string::npos ? "" : name.substr(dot + 1);
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
}

std::string TrimmedText(const std::vector<uint8_t>& data) {
  std::string text(data.begin(), data.end());
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

// Calls `take` for each complete sample of one shard; stops early when take returns false
// (returns false then). Incomplete samples and a damaged archive go to `bad_log`.
bool ReadShard(const std::string& shard, BadSampleLog& bad_log,
               const std::function<bool(EncodedSample&&)>& take) {
  EncodedSample sample;
  std::string current_key;
  auto finish = [&]() -> bool {
    if (current_key.empty()) return true;
    std::string missing = sample.image.empty() ? "an image (.png/.jpg)" : "";
    if (!sample.has_caption) missing += std::string(missing.empty() ? "" : " and ") + "a .txt";
    if (!missing.empty()) {
      bad_log.Report(sample.where + ": sample without " + missing);
      return true;
    }
    return take(std::move(sample));
  };
  std::unique_ptr<TarReader> reader;
  try {
    reader = std::make_unique<TarReader>(shard);
  } catch (const std::runtime_error& e) {
    bad_log.Report(std::string(e.what()) + "; shard skipped");
    return true;
  }
  TarMember member;
  while (true) {
    try {
      if (!reader->Next(member)) break;
    } catch (const std::runtime_error& e) {
      // The archive is damaged: the samples before the damage were used, the rest is lost.
      bad_log.Report(std::string(e.what()) + "; the rest of this shard is skipped");
      return true;
    }
    std::string key, extension;
    SplitKey(member.name, key, extension);
    if (key != current_key) {
      if (!finish()) return false;
      sample = EncodedSample{};
      sample.where = shard + ":" + key;
      current_key = key;
    }
    if (extension == "png" || extension == "jpg" || extension == "jpeg") {
      sample.image_name = shard + ":" + member.name;
      sample.image = std::move(member.data);
    } else if (extension == "txt") {
      sample.caption = TrimmedText(member.data);
      sample.has_caption = true;
    } else if (extension == "cls") {
      const std::string text = TrimmedText(member.data);
      char* end = nullptr;
      const long value = std::strtol(text.c_str(), &end, 10);
      sample.label = (!text.empty() && *end == '\0') ? static_cast<int>(value) : -1;
    }
  }
  return finish();
}

// See the file comment. Without train_num_samples a rank streams its shards once (batch count
// unknown); with it, every rank yields train_num_samples / (world_size x batch_size) batches,
// cycling through its shards as needed, so all ranks step together.
class WebDatasetSource : public BatchSource {
 public:
  explicit WebDatasetSource(const DataOptions& options)
      : options_(options),
        shards_(ExpandShardPattern(options.train_data)),
        workers_(std::max(1, options.workers)),
        bad_log_(options.skip_bad_data) {
    if (options.batch_size < 1) throw std::runtime_error("batch size must be at least 1");
    ShardsFor(shards_, options.rank, options.world_size, 0, workers_);  // enough shards?
    if (options.train_num_samples > 0) {
      batches_ = std::max<int64_t>(
          1, options.train_num_samples / (int64_t{options.world_size} * options.batch_size));
    } else if (options.world_size > 1) {
      throw std::runtime_error(
          "webdataset across " + std::to_string(options.world_size) +
          " ranks needs --train-num-samples, so that every rank runs the same number of batches");
    }
  }
  ~WebDatasetSource() override { prefetcher_.Stop(); }

  void StartEpoch(int epoch) override {
    prefetcher_.Stop();
    started_ = true;
    delivered_ = 0;
    // Every rank shuffles the shard list the same way, then takes its own part.
    std::vector<std::string> order;
    for (int64_t i : SeededPermutation(static_cast<int64_t>(shards_.size()),
                                       MixSeed(options_.seed ^ MixSeed(epoch)))) {
      order.push_back(shards_[static_cast<size_t>(i)]);
    }
    prefetcher_.Start(workers_, options_.prefetch, [this, order, epoch](int w, const auto& emit) {
      Stream(
          ShardsFor(order, options_.rank, options_.world_size, w, workers_),
          MixSeed(options_.seed ^ MixSeed((uint64_t{static_cast<uint32_t>(epoch)} << 32) |
                                          (uint64_t{static_cast<uint32_t>(options_.rank)} << 12) |
                                          static_cast<uint32_t>(w))),
          emit);
    });
  }

  bool Next(HostBatch& batch) override {
    if (!started_) StartEpoch(0);
    if (batches_ > 0 && delivered_ >= batches_) {
      prefetcher_.Stop();
      return false;
    }
    if (!prefetcher_.Next(batch)) return false;
    ++delivered_;
    return true;
  }

  int64_t BatchesPerEpoch() const override { return batches_; }
  int64_t SkippedSamples() const override { return bad_log_.Count(); }

 private:
  // One loader thread: its shards -> shuffle buffer -> decoded batches.
  void Stream(std::vector<std::string> shards, uint64_t seed, const BatchPrefetcher::Emit& emit) {
    std::mt19937_64 rng(seed);
    const size_t capacity = static_cast<size_t>(std::max(1, options_.shuffle_buffer));
    std::vector<EncodedSample> buffer;
    HostBatch batch = prefetcher_.Spare();
    batch.size = 0;
    PassCounts counts;
    auto take = [&](EncodedSample&& sample) {
      if (buffer.size() < capacity) {
        buffer.push_back(std::move(sample));
        return true;
      }
      const size_t pick = std::uniform_int_distribution<size_t>(0, buffer.size() - 1)(rng);
      std::swap(buffer[pick], sample);
      return AddToBatch(std::move(sample), batch, emit, counts);
    };
    const bool repeat = batches_ > 0;
    for (int pass = 0;; ++pass) {
      if (pass > 0) std::shuffle(shards.begin(), shards.end(), rng);
      const int64_t before = bad_log_.Count();
      size_t taken = 0;
      counts = PassCounts{};
      for (const std::string& shard : shards) {
        const bool go_on = ReadShard(shard, bad_log_, [&](EncodedSample&& s) {
          ++taken;
          return take(std::move(s));
        });
        if (!go_on) return;
      }
      if (!repeat) break;
      if (taken == 0) {
        throw std::runtime_error(
            "webdataset: no usable sample in " + std::to_string(shards.size()) +
            " shards (first: " + shards.front() + "); " +
            std::to_string(bad_log_.Count() - before) + " bad samples or shards reported above");
      }
      // Re-reading shards whose images all fail to decode would never yield a batch.
      if (pass > 0 && counts.attempted > 0 && counts.decoded == 0) {
        throw std::runtime_error("webdataset: none of the " + std::to_string(counts.attempted) +
                                 " images decoded in a pass over " + std::to_string(shards.size()) +
                                 " shards (first: " + shards.front() + ") could be used");
      }
    }
    std::shuffle(buffer.begin(), buffer.end(), rng);
    for (EncodedSample& sample : buffer) {
      if (!AddToBatch(std::move(sample), batch, emit, counts)) return;
    }
    if (batch.size > 0 && !options_.drop_last) {
      const size_t values = static_cast<size_t>(batch.size) * options_.channels *
                            options_.image_size * options_.image_size;
      if (options_.raw_pixels) {
        batch.raw_pixels.resize(values);
      } else {
        batch.pixels.resize(values);
      }
      emit(std::move(batch));
    }
  }

  // Samples that left the shuffle buffer during one pass over the shards, and how many decoded.
  struct PassCounts {
    int64_t attempted = 0, decoded = 0;
  };

  // Decodes `sample` into the batch being filled and emits the batch when full. False: stop.
  bool AddToBatch(EncodedSample&& sample, HostBatch& batch, const BatchPrefetcher::Emit& emit,
                  PassCounts& counts) {
    const int size = options_.image_size;
    const size_t values = static_cast<size_t>(options_.channels) * size * size;
    if (batch.size == 0) {
      batch.channels = options_.channels;
      batch.height = batch.width = size;
      if (options_.raw_pixels) {
        batch.pixels.clear();
        batch.raw_pixels.resize(static_cast<size_t>(options_.batch_size) * values);
      } else {
        batch.raw_pixels.clear();
        batch.pixels.resize(static_cast<size_t>(options_.batch_size) * values);
      }
      batch.captions.clear();
      batch.labels.clear();
      batch.indices.clear();
    }
    ++counts.attempted;
    try {
      const Image image = DecodeImage(sample.image.data(), sample.image.size(), sample.image_name);
      if (options_.raw_pixels) {
        ImageToModelBytes(image, options_.channels, size, &batch.raw_pixels[batch.size * values]);
      } else {
        ImageToModelInput(image, options_.channels, size, &batch.pixels[batch.size * values]);
      }
    } catch (const std::runtime_error& e) {
      bad_log_.Report(e.what());
      return true;
    }
    ++counts.decoded;
    batch.captions.push_back(std::move(sample.caption));
    batch.labels.push_back(sample.label);
    batch.indices.push_back(-1);
    if (++batch.size < options_.batch_size) return true;
    const bool go_on = emit(std::move(batch));
    batch = prefetcher_.Spare();
    batch.size = 0;
    return go_on;
  }

  DataOptions options_;
  std::vector<std::string> shards_;
  int workers_;
  BadSampleLog bad_log_;
  int64_t batches_ = -1;
  int64_t delivered_ = 0;
  bool started_ = false;
  BatchPrefetcher prefetcher_;  // last: its threads stop before the members they use go away
};

}  // namespace

std::unique_ptr<BatchSource> MakeWebDatasetSource(const DataOptions& options) {
  return std::make_unique<WebDatasetSource>(options);
}

}  // namespace dtrain::clip
