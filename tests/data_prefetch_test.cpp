// The bounded queue and the loader threads: ordering, back-pressure, errors, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/data/prefetch_queue.h"

namespace dtrain::clip {
namespace {

TEST(BoundedQueue, KeepsOrderAndCloseReleasesABlockedProducer) {
  BoundedQueue<int> queue(2);
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    for (int i = 0; i < 1000; ++i) {
      if (!queue.Push(i)) return;
      ++pushed;
    }
  });
  for (int i = 0; i < 10; ++i) {
    int value = -1;
    ASSERT_TRUE(queue.Pop(value));
    EXPECT_EQ(value, i);
  }
  // The producer is now blocked on a full queue (at most 2 ahead of the consumer).
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_LE(pushed.load(), 12);
  queue.Close();
  producer.join();  // a hang here is the failure
  int value;
  while (queue.Pop(value)) {
  }
  EXPECT_FALSE(queue.Push(1));
}

HostBatch Numbered(int64_t b) {
  HostBatch batch;
  batch.size = 1;
  batch.indices = {b};
  return batch;
}

TEST(BatchPrefetcher, DeliversBatchesInOrderWhateverTheThreadTiming) {
  const int workers = 3;
  const int64_t batches = 50;
  BatchPrefetcher prefetcher;
  prefetcher.Start(workers, 4, [&](int w, const BatchPrefetcher::Emit& emit) {
    for (int64_t b = w; b < batches; b += workers) {
      // Uneven work: later workers are slower.
      std::this_thread::sleep_for(std::chrono::microseconds(200 * w + (b % 7) * 50));
      if (!emit(Numbered(b))) return;
    }
  });
  HostBatch batch;
  for (int64_t b = 0; b < batches; ++b) {
    ASSERT_TRUE(prefetcher.Next(batch));
    EXPECT_EQ(batch.indices[0], b);
  }
  EXPECT_FALSE(prefetcher.Next(batch));
}

TEST(BatchPrefetcher, RethrowsALoaderErrorInTheCallersThread) {
  BatchPrefetcher prefetcher;
  prefetcher.Start(2, 2, [](int w, const BatchPrefetcher::Emit& emit) {
    emit(Numbered(w));
    if (w == 1) throw std::runtime_error("shard-7.tar: truncated tar");
    for (int64_t b = 2;; b += 2) {
      if (!emit(Numbered(b))) return;  // worker 0 would run forever
    }
  });
  HostBatch batch;
  ASSERT_TRUE(prefetcher.Next(batch));
  ASSERT_TRUE(prefetcher.Next(batch));
  ASSERT_TRUE(prefetcher.Next(batch));
  try {
    prefetcher.Next(batch);
    FAIL() << "expected the loader's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "shard-7.tar: truncated tar");
  }
}

TEST(BatchPrefetcher, StopsEndlessLoadersMidEpoch) {
  BatchPrefetcher prefetcher;
  std::atomic<int> finished{0};
  prefetcher.Start(4, 4, [&](int, const BatchPrefetcher::Emit& emit) {
    while (emit(Numbered(0))) {
    }
    ++finished;
  });
  HostBatch batch;
  ASSERT_TRUE(prefetcher.Next(batch));
  prefetcher.Stop();
  EXPECT_EQ(finished.load(), 4);
  EXPECT_FALSE(prefetcher.Next(batch));
}

}  // namespace
}  // namespace dtrain::clip
