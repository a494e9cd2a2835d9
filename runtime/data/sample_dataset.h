// The loaders' private contract: a dataset read sample by sample (fashion-mnist, csv, synthetic),
// turned into batches by one BatchSource that shards ids across ranks and loads in background.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>

#include "runtime/data/data_source.h"

namespace dtrain::clip {

// A sample that cannot be used (missing file, corrupt image, bad CSV row); the message names the
// file and line. Skipped and counted, or fatal, as DataOptions::skip_bad_data says.
struct BadSample : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Counts bad samples and reports each on stderr as it is met, once (a shard read again in a
// later pass does not count its damage twice); with skipping off, Report throws
// std::runtime_error instead. Thread-safe.
class BadSampleLog {
 public:
  explicit BadSampleLog(bool skip) : skip_(skip) {}
  void Report(const std::string& what);
  int64_t Count() const { return count_.load(); }

 private:
  const bool skip_;
  std::atomic<int64_t> count_{0};
  std::mutex mutex_;
  std::unordered_set<std::string> reported_;
};

struct Image;

// Where one sample goes: channels x image_size x image_size values at `pixels` (normalised
// floats) or, when that is null, at `raw` (8-bit, DataOptions::raw_pixels).
struct SampleSlot {
  float* pixels;
  uint8_t* raw;
  std::string& caption;
  int& label;
};

// Writes `image` into the slot in the form it asks for.
void WriteSample(const Image& image, int channels, int size, SampleSlot& slot);

// Samples addressed by id 0..Size()-1. Load is called from several loader threads at once and
// throws BadSample for a sample that cannot be used.
class SampleDataset {
 public:
  virtual ~SampleDataset() = default;
  virtual int64_t Size() const = 0;
  // `epoch` lets a dataset vary what it derives per visit (the caption template of a label).
  virtual void Load(int64_t index, int epoch, SampleSlot slot) const = 0;
};

std::unique_ptr<SampleDataset> MakeFashionMnistDataset(const DataOptions& options);
// Bad rows are reported to `bad_log` as the file is parsed.
std::unique_ptr<SampleDataset> MakeCsvDataset(const DataOptions& options, BadSampleLog& bad_log);
std::unique_ptr<SampleDataset> MakeSyntheticDataset(const DataOptions& options);

// Batches of a SampleDataset: DistributedSampler ids for this rank, `workers` loader threads,
// `prefetch` batches ahead. A bad sample is replaced by the next usable one of this rank's share,
// so every rank still gets full batches of the same size.
// `bad_log` may already count bad rows found while the dataset was opened.
std::unique_ptr<BatchSource> MakeIndexedBatchSource(std::shared_ptr<const SampleDataset> dataset,
                                                    const DataOptions& options,
                                                    std::shared_ptr<BadSampleLog> bad_log);

// Streams tar shards (webdataset); defined in webdataset_source.cpp.
std::unique_ptr<BatchSource> MakeWebDatasetSource(const DataOptions& options);

}  // namespace dtrain::clip
