#include "runtime/train/batch_stager.h"

namespace dtrain::clip {

void BatchStager::Start() {
  Stop();
  queue_ = std::make_unique<BoundedQueue<Item>>(static_cast<size_t>(depth_));
  thread_ = std::thread([this] { Run(); });
}

void BatchStager::Run() {
  try {
    for (;;) {
      Item item;
      if (!source_.Next(item.batch.host)) {
        item.end = true;
        queue_->Push(std::move(item));
        return;
      }
      stage_(item.batch);
      if (!queue_->Push(std::move(item))) return;  // stopping
    }
  } catch (...) {
    Item failed;
    failed.error = std::current_exception();
    queue_->Push(std::move(failed));
  }
}

bool BatchStager::Next(StagedBatch& batch) {
  if (!queue_) return false;
  Item item;
  if (!queue_->Pop(item)) return false;
  if (item.error) {
    Stop();
    std::rethrow_exception(item.error);
  }
  if (item.end) {
    Stop();  // the thread has ended
    return false;
  }
  batch = std::move(item.batch);
  return true;
}

void BatchStager::Stop() {
  if (!queue_) return;
  queue_->Close();
  queue_->Clear();
  if (thread_.joinable()) thread_.join();
  queue_.reset();
}

}  // namespace dtrain::clip
