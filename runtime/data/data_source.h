// BatchSource: where training batches come from (fashion-mnist, csv, webdataset, synthetic).
// Loaders are torch-free and fill HostBatch in background threads with a bounded prefetch
// queue; the trainer turns a HostBatch into tensors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dtrain::clip {

// One batch as the loaders produce it, before it becomes tensors.
struct HostBatch {
  int64_t size = 0;  // samples in this batch
  int channels = 0, height = 0, width = 0;
  std::vector<float> pixels;          // size*channels*height*width, normalised
  std::vector<uint8_t> raw_pixels;    // the same unnormalised, instead (DataOptions::raw_pixels)
  std::vector<std::string> captions;  // one per sample
  std::vector<int> labels;            // class index, or -1 where the dataset has none
  std::vector<int64_t> indices;       // sample ids in dataset order (-1 for streamed data)
};

struct DataOptions {
  std::string dataset_type = "fashion-mnist";  // fashion-mnist | csv | webdataset | synthetic
  std::string train_data;  // fmnist dir, CSV file, or tar shard pattern ({0000..0099})
  std::string csv_img_key = "filepath";
  std::string csv_caption_key = "title";
  std::string csv_separator = "\t";
  int64_t train_num_samples = 0;      // 0: the whole dataset
  int batch_size = 256;               // per rank
  int workers = 1;                    // loader threads
  int prefetch = 4;                   // batches queued ahead
  int shuffle_buffer = 1000;          // webdataset: samples shuffled together, per loader thread
  int channels = 1, image_size = 28;  // what the model takes; images are converted/resized
  // Deliver 8-bit pixels (HostBatch::raw_pixels) for the trainer to normalise on the device: a
  // quarter of the bytes to copy, and no float pass on the CPU.
  bool raw_pixels = false;
  bool skip_bad_data = true;  // false: the first bad sample is fatal
  bool drop_last = true;      // false: pad the last shard by repeating samples
  uint64_t seed = 0;
  int rank = 0, world_size = 1;  // explicit: never read from a global distributed state
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual void StartEpoch(int epoch) = 0;
  // Starts `epoch` mid-way (a resume): its first `consumed` samples of the epoch's global order,
  // trained on by all ranks of the run that wrote the checkpoint, are passed over and the rest is
  // split over this run's ranks. Returns the batches this rank gets from what is left, or -1 when
  // unknown. Streamed shards cannot skip: they say so on stderr and start the epoch whole.
  virtual int64_t ResumeEpoch(int epoch, int64_t consumed);
  // Fills `batch`; false at the end of the epoch.
  virtual bool Next(HostBatch& batch) = 0;
  // Batches this rank sees per epoch, or -1 when unknown in advance (streamed shards).
  virtual int64_t BatchesPerEpoch() const = 0;
  // Bad samples skipped so far (reported with path/line on stderr as they happen).
  virtual int64_t SkippedSamples() const = 0;
};

// Throws std::runtime_error naming the file (and line) when the data cannot be used.
std::unique_ptr<BatchSource> MakeBatchSource(const DataOptions& options);

}  // namespace dtrain::clip
