// BatchStager on real loaders (the synthetic dataset, several loader threads): the batches come
// in the loaders' order with what the stage made of them, the epoch ends, a stop mid-epoch and a
// restart begin the next epoch whole, and what the loaders or the stage throw reaches the
// step's thread. BatchUpload on the CPU: the staged tensors borrow the batch, 8-bit pixels are
// normalised on Receive.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/data/data_source.h"
#include "runtime/data/image_codec.h"
#include "runtime/train/batch_stager.h"
#include "runtime/train/batch_upload.h"

namespace dtrain::clip {
namespace {

DataOptions Synthetic(int64_t samples) {
  DataOptions o;
  o.dataset_type = "synthetic";
  o.train_num_samples = samples;
  o.batch_size = 8;
  o.workers = 3;
  o.prefetch = 6;
  o.seed = 11;
  return o;
}

// The batches' first sample ids, read from the source directly.
std::vector<int64_t> DirectOrder(const DataOptions& options, int epoch) {
  auto source = MakeBatchSource(options);
  source->StartEpoch(epoch);
  std::vector<int64_t> first;
  HostBatch batch;
  while (source->Next(batch)) first.push_back(batch.indices.at(0));
  return first;
}

// The stage a trainer gives: marks each batch with the thread that staged it.
struct Marking {
  std::atomic<int> staged{0};
  std::thread::id thread;
  void operator()(StagedBatch& b) {
    thread = std::this_thread::get_id();
    b.sent.tokens = torch::full({b.host.size, 1}, b.host.indices.at(0), torch::kLong);
    ++staged;
  }
};

TEST(BatchStager, BatchesComeInTheLoadersOrderWithWhatTheStageMadeAndTheEpochEnds) {
  const DataOptions options = Synthetic(8 * 25);
  const std::vector<int64_t> direct = DirectOrder(options, 0);
  ASSERT_EQ(direct.size(), 25u);
  auto source = MakeBatchSource(options);
  Marking marking;
  BatchStager stager(*source, [&](StagedBatch& b) { marking(b); });
  source->StartEpoch(0);
  stager.Start();
  std::vector<int64_t> staged;
  StagedBatch batch;
  while (stager.Next(batch)) {
    staged.push_back(batch.host.indices.at(0));
    EXPECT_EQ(batch.sent.tokens[0][0].item<int64_t>(), batch.host.indices.at(0));
  }
  EXPECT_EQ(staged, direct);
  EXPECT_NE(marking.thread, std::this_thread::get_id());  // staged beside the caller
  EXPECT_FALSE(stager.Next(batch));                       // and stays ended
}

TEST(BatchStager, AStopMidEpochThenARestartGivesTheNextEpochWhole) {
  const DataOptions options = Synthetic(8 * 20);
  auto source = MakeBatchSource(options);
  Marking marking;
  BatchStager stager(
      *source, [&](StagedBatch& b) { marking(b); }, /*depth=*/2);
  source->StartEpoch(0);
  stager.Start();
  StagedBatch batch;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(stager.Next(batch));
  // The stager is ahead (its queue full, blocked on it): Stop() must end it all the same.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (marking.staged < 5 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stager.Stop();
  EXPECT_FALSE(stager.Next(batch));
  source->StartEpoch(1);
  stager.Start();
  std::vector<int64_t> staged;
  while (stager.Next(batch)) staged.push_back(batch.host.indices.at(0));
  EXPECT_EQ(staged, DirectOrder(options, 1));
}

TEST(BatchStager, WhatTheStageThrowsIsRethrownInTheCallersThreadAfterTheBatchesBefore) {
  auto source = MakeBatchSource(Synthetic(8 * 10));
  int calls = 0;
  BatchStager stager(*source, [&](StagedBatch&) {
    if (++calls == 4) throw std::runtime_error("batch 4: no tokens");
  });
  source->StartEpoch(0);
  stager.Start();
  StagedBatch batch;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(stager.Next(batch));
  try {
    stager.Next(batch);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "batch 4: no tokens");
  }
  EXPECT_FALSE(stager.Next(batch));
}

// A source whose loaders fail at their third batch, as a loader with --skip-bad-data off does.
class FailingSource : public BatchSource {
 public:
  void StartEpoch(int) override { served_ = 0; }
  bool Next(HostBatch& batch) override {
    if (++served_ == 3) throw std::runtime_error("shard-0003.tar: sample 17: not a JPEG");
    batch.size = 1;
    batch.indices = {served_};
    return true;
  }
  int64_t BatchesPerEpoch() const override { return 10; }
  int64_t SkippedSamples() const override { return 0; }

 private:
  int64_t served_ = 0;
};

TEST(BatchStager, WhatTheLoadersThrowReachesTheCallersThread) {
  FailingSource source;
  BatchStager stager(source, [](StagedBatch&) {});
  source.StartEpoch(0);
  stager.Start();
  StagedBatch batch;
  ASSERT_TRUE(stager.Next(batch));
  ASSERT_TRUE(stager.Next(batch));
  EXPECT_THROW(
      {
        try {
          stager.Next(batch);
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "shard-0003.tar: sample 17: not a JPEG");
          throw;
        }
      },
      std::runtime_error);
}

TEST(BatchStager, NeverStartedItHasNoBatchesAndStopsAtOnce) {
  auto source = MakeBatchSource(Synthetic(8 * 4));
  BatchStager stager(*source, [](StagedBatch&) {});
  StagedBatch batch;
  EXPECT_FALSE(stager.Next(batch));
  stager.Stop();
}

TEST(BatchUpload, OnTheCpuFloatPixelsAreBorrowedAndBytesNormalisedOnReceive) {
  BatchUpload upload(torch::Device(torch::kCPU), 1);
  HostBatch floats;
  floats.size = 2;
  floats.channels = 1;
  floats.height = floats.width = 2;
  floats.pixels = {0, 1, 2, 3, 4, 5, 6, 7};
  auto tokens = torch::arange(6, torch::kLong).view({2, 3});
  BatchUpload::InFlight sent = upload.Send(floats, tokens);
  torch::Tensor images, got_tokens;
  upload.Receive(sent, &images, &got_tokens);
  EXPECT_EQ(images.data_ptr<float>(), floats.pixels.data());
  EXPECT_TRUE(torch::equal(got_tokens, tokens));

  HostBatch bytes = floats;
  bytes.pixels.clear();
  bytes.raw_pixels = {0, 255, 10, 20, 30, 40, 50, 60};
  sent = upload.Send(bytes, tokens);
  upload.Receive(sent, &images, &got_tokens);
  const Normalization n = NormalizationFor(1);
  ASSERT_EQ(images.sizes(), (std::vector<int64_t>{2, 1, 2, 2}));
  EXPECT_NEAR(images[0][0][0][0].item<float>(), -n.mean[0] / n.std[0], 1e-5);
  EXPECT_NEAR(images[0][0][0][1].item<float>(), (1.0f - n.mean[0]) / n.std[0], 1e-5);
}

}  // namespace
}  // namespace dtrain::clip
