// The checkpoint file's progress: the mid-epoch place (--save-every-n-steps) round-trips, and a
// checkpoint written before those fields existed still loads, at an epoch boundary.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <string>

#include "runtime/train/checkpoint.h"

namespace dtrain::clip {
namespace {

struct Tiny {
  torch::nn::Linear model{4, 2};
  torch::optim::AdamW optimizer{model->parameters(), torch::optim::AdamWOptions(1e-3)};
};

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/clip_checkpoint_test_" + name + ".pt";
}

TEST(ClipCheckpointProgress, MidEpochPlaceRoundTrips) {
  Tiny a, b;
  TrainProgress saved{1, 7, 120, 24, 2, 8};
  const std::string path = TempPath("mid_epoch");
  SaveCheckpoint(path, *a.model, a.optimizer, saved, "tiny");
  TrainProgress loaded = LoadCheckpoint(path, *b.model, b.optimizer);
  EXPECT_EQ(loaded.epoch, 1);
  EXPECT_EQ(loaded.step, 7);
  EXPECT_EQ(loaded.samples, 120);
  EXPECT_EQ(loaded.epoch_samples, 24);
  EXPECT_EQ(loaded.world_size, 2);
  EXPECT_EQ(loaded.global_batch, 8);
}

// The layout of a checkpoint from before mid-epoch saves: no epoch_samples, world_size or
// global_batch.
TEST(ClipCheckpointProgress, OlderCheckpointLoadsAtAnEpochBoundary) {
  Tiny a, b;
  torch::serialize::OutputArchive archive, weights, optimizer_state;
  for (const auto& item : a.model->named_parameters()) weights.write(item.key(), item.value());
  archive.write("model", weights);
  a.optimizer.save(optimizer_state);
  archive.write("optimizer", optimizer_state);
  archive.write("epoch", torch::tensor(int64_t{2}));
  archive.write("step", torch::tensor(int64_t{16}));
  archive.write("samples", torch::tensor(int64_t{128}));
  archive.write("rng_cpu", at::detail::getDefaultCPUGenerator().get_state());
  archive.write("model_name", c10::IValue(std::string("tiny")));
  const std::string path = TempPath("older");
  archive.save_to(path);

  TrainProgress loaded = LoadCheckpoint(path, *b.model, b.optimizer);
  EXPECT_EQ(loaded.epoch, 2);
  EXPECT_EQ(loaded.step, 16);
  EXPECT_EQ(loaded.epoch_samples, 0);
  EXPECT_EQ(loaded.world_size, 0);
  EXPECT_EQ(loaded.global_batch, 0);
  EXPECT_TRUE(torch::equal(b.model->weight, a.model->weight));
}

}  // namespace
}  // namespace dtrain::clip
