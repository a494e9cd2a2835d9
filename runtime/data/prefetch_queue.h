// Background loading: a bounded blocking queue, and the loader threads that fill one queue each
// while the trainer takes batches in a fixed round-robin order (deterministic whatever the timing).
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/data/data_source.h"

namespace dtrain::clip {

// A FIFO of at most `capacity` items. Push blocks while full, Pop while empty; Close() wakes
// everyone: Push then refuses items and Pop drains what is left, then returns false.
template <typename T>
class BoundedQueue {
 public:
  explicit BoundedQueue(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  bool Push(T item) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < capacity_; });
    if (closed_) return false;
    items_.push_back(std::move(item));
    not_empty_.notify_one();
    return true;
  }

  bool Pop(T& item) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return closed_ || !items_.empty(); });
    if (items_.empty()) return false;
    item = std::move(items_.front());
    items_.pop_front();
    not_full_.notify_one();
    return true;
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    not_full_.notify_all();
    not_empty_.notify_all();
  }

  // Drops queued items (after Close: a stopped loader's batches are no longer wanted).
  void Clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.clear();
    not_full_.notify_all();
  }

 private:
  const size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<T> items_;
  bool closed_ = false;
};

// Runs `workers` threads, each calling the producer with its worker index and an `emit`
// function; emit queues a batch and returns false once the prefetcher is stopping, and the
// producer should then return. Next() takes batches round-robin across the workers still
// running and rethrows a producer's exception in the caller's thread. Stop() (and the
// destructor) end the threads at any point of an epoch.
class BatchPrefetcher {
 public:
  using Emit = std::function<bool(HostBatch&&)>;
  using Producer = std::function<void(int worker, const Emit& emit)>;

  BatchPrefetcher() = default;
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;
  ~BatchPrefetcher() { Stop(); }

  // `prefetch` batches in total are queued ahead, spread over the workers (at least one each).
  void Start(int workers, int prefetch, Producer producer);
  // False when every worker has finished and its queue is drained. What `batch` held before is
  // kept as a spare, so its buffers are reused rather than freed and allocated again.
  bool Next(HostBatch& batch);
  void Stop();
  // A batch handed back through Next (buffers with their capacity), or an empty one. Producers
  // start each batch from it: large pixel buffers are then not mapped and zeroed per batch.
  HostBatch Spare();

 private:
  struct Slot {
    HostBatch batch;
    std::exception_ptr error;
  };
  std::vector<std::unique_ptr<BoundedQueue<Slot>>> queues_;
  std::vector<std::thread> threads_;
  std::vector<int> active_;  // workers whose queue may still hold batches, in turn order
  size_t turn_ = 0;
  std::mutex spare_mutex_;
  std::vector<HostBatch> spares_;
};

}  // namespace dtrain::clip
