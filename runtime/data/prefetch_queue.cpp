#include "runtime/data/prefetch_queue.h"

#include <algorithm>

namespace dtrain::clip {

void BatchPrefetcher::Start(int workers, int prefetch, Producer producer) {
  Stop();
  workers = std::max(1, workers);
  const size_t per_worker = static_cast<size_t>(std::max(1, (prefetch + workers - 1) / workers));
  for (int w = 0; w < workers; ++w) {
    queues_.push_back(std::make_unique<BoundedQueue<Slot>>(per_worker));
    active_.push_back(w);
  }
  turn_ = 0;
  for (int w = 0; w < workers; ++w) {
    BoundedQueue<Slot>* queue = queues_[static_cast<size_t>(w)].get();
    threads_.emplace_back([queue, w, producer] {
      Emit emit = [queue](HostBatch&& batch) { return queue->Push(Slot{std::move(batch), {}}); };
      try {
        producer(w, emit);
      } catch (...) {
        queue->Push(Slot{{}, std::current_exception()});
      }
      queue->Close();
    });
  }
}

bool BatchPrefetcher::Next(HostBatch& batch) {
  while (!active_.empty()) {
    turn_ %= active_.size();
    Slot slot;
    if (!queues_[static_cast<size_t>(active_[turn_])]->Pop(slot)) {
      active_.erase(active_.begin() + static_cast<std::ptrdiff_t>(turn_));
      continue;
    }
    if (slot.error) {
      Stop();
      std::rethrow_exception(slot.error);
    }
    if (batch.pixels.capacity() > 0 || batch.raw_pixels.capacity() > 0) {
      std::lock_guard<std::mutex> lock(spare_mutex_);
      if (spares_.size() < queues_.size() + 1) spares_.push_back(std::move(batch));
    }
    batch = std::move(slot.batch);
    ++turn_;
    return true;
  }
  return false;
}

HostBatch BatchPrefetcher::Spare() {
  std::lock_guard<std::mutex> lock(spare_mutex_);
  if (spares_.empty()) return HostBatch{};
  HostBatch batch = std::move(spares_.back());
  spares_.pop_back();
  return batch;
}

void BatchPrefetcher::Stop() {
  for (auto& queue : queues_) {
    queue->Close();
    queue->Clear();
  }
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  queues_.clear();
  active_.clear();
}

}  // namespace dtrain::clip
