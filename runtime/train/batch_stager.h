// BatchStager: the next batches made ready while the step runs. A thread of its own takes each
// batch from the loaders and hands it to `stage` (the trainer's: tokenize the captions, cut the
// text, BatchUpload::Send: on CUDA the pinned copies queued on a copy stream), up to `depth`
// batches ahead; the step's thread takes them in order with Next(). The host's share of a batch
// (~10 ms at batch 256 of ViT-B/32 on an H200's host, on the step's thread before) then runs
// beside the step instead of between two steps.
//
// One epoch at a time: Start() after the source's StartEpoch/ResumeEpoch, Stop() before the
// source is started again or read from elsewhere (the thread calls its Next()).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <thread>

#include "runtime/data/data_source.h"
#include "runtime/data/prefetch_queue.h"
#include "runtime/train/batch_upload.h"

namespace dtrain::clip {

struct StagedBatch {
  HostBatch host;  // what the sent tensors may borrow (the CPU's float pixels)
  BatchUpload::InFlight sent;
};

class BatchStager {
 public:
  using Stage = std::function<void(StagedBatch&)>;  // fills `sent` from `host`

  BatchStager(BatchSource& source, Stage stage, int depth = 2)
      : source_(source), stage_(std::move(stage)), depth_(depth < 1 ? 1 : depth) {}
  ~BatchStager() { Stop(); }
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;

  void Start();
  // The next batch of the epoch; false at its end (or before Start). Rethrows what the loaders
  // or `stage` threw, in the caller's thread.
  bool Next(StagedBatch& batch);
  // Ends the thread at any point of the epoch; the batches staged ahead are dropped.
  void Stop();

 private:
  struct Item {
    StagedBatch batch;
    bool end = false;
    std::exception_ptr error;
  };
  void Run();

  BatchSource& source_;
  Stage stage_;
  int depth_;
  std::unique_ptr<BoundedQueue<Item>> queue_;
  std::thread thread_;
};

}  // namespace dtrain::clip
