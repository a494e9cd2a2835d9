// The checkpoint file's progress: the mid-epoch place (--save-every-n-steps) round-trips, and a
// checkpoint written before those fields existed still loads, at an epoch boundary. The flat
// parameter layout: aligned (in a real step too), and the moments of a checkpoint in the older
// order converted.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/train/checkpoint.h"
#include "runtime/train/checkpoint_parts.h"
#include "runtime/train/device_checks.h"
#include "runtime/train/flat_parameters.h"
#include "tests/support/files.h"
#include "tests/support/loop_disk.h"

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

// The disk under the checkpoints goes away during a save, as a drive that fell off the bus does
// (tests/support/loop_disk.h): the new checkpoint is taken into the page cache, and its fsync
// fails. The save must say so and leave the last checkpoint the disk took in its place. Before,
// the part the disk never took was renamed over it: once the page cache let go of that file, the
// folder held no usable checkpoint at all. Needs root (a loop device); skipped otherwise.
TEST(ClipCheckpointDisk, ADiskThatFailsTheWriteKeepsTheLastCheckpoint) {
  if (::geteuid() != 0) GTEST_SKIP() << dtrain::testing::LoopDisk::kNeedsRoot;
  const std::string dir =
      ::testing::TempDir() + "/clip_checkpoint_disk_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  {
    dtrain::testing::LoopDisk disk(dir, "16M");
    ASSERT_EQ(disk.error(), "");
    const std::string path = disk.path() + "/epoch_latest.pt";
    Tiny a;
    SaveCheckpoint(path, *a.model, a.optimizer, TrainProgress{0, 4, 64, 64, 1, 16}, "tiny");
    const std::string step4 = dtrain::testing::ReadFile(path);
    ASSERT_FALSE(step4.empty());
    {
      torch::NoGradGuard no_grad;
      a.model->weight.fill_(1.0f);
    }
    ASSERT_TRUE(disk.Fail()) << disk.error();
    std::string error;
    try {
      SaveCheckpoint(path, *a.model, a.optimizer, TrainProgress{0, 6, 96, 96, 1, 16}, "tiny");
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(": cannot write checkpoint: the disk did not take it (fsync: "
                         "Input/output error); " +
                         path + " is kept as it was"),
              std::string::npos)
        << error;
    EXPECT_TRUE(dtrain::testing::ReadFile(path) == step4) << "the step-4 checkpoint was replaced";
    for (const auto& entry : std::filesystem::directory_iterator(disk.path()))
      EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
    Tiny b;
    EXPECT_EQ(LoadCheckpoint(path, *b.model, b.optimizer).step, 4);
  }
  std::filesystem::remove_all(dir);
}

// Where parameter `p` (float32) starts in flat `buffer`, in floats.
int64_t FloatsFrom(const torch::Tensor& buffer, const torch::Tensor& p) {
  return (static_cast<const char*>(p.data_ptr()) - static_cast<const char*>(buffer.data_ptr())) /
         4;
}

// Parts of checkpoints: this host's part of a process that is gone is removed; another host's
// (a shared folder, its writer maybe alive), a live process's and whole checkpoints are left.
TEST(CheckpointParts, OnlyThisHostsPartsOfEndedWritersGo) {
  const std::string dir = ::testing::TempDir() + "/checkpoint_parts_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a pid that ended
  const std::string ended = std::to_string(child), live = std::to_string(getpid());
  const std::vector<std::string> kept = {"epoch_1.pt", "epoch_latest.pt",
                                         "notes.tmp." + std::string(host) + "." + ended,
                                         "epoch_latest.pt.tmp.other-node." + ended,
                                         "epoch_latest.pt.tmp." + std::string(host) + "." + live};
  const std::string gone = "epoch_latest.pt.tmp." + std::string(host) + "." + ended;
  for (const std::string& name : kept) std::ofstream(dir + "/" + name) << "x";
  std::ofstream(dir + "/" + gone) << "half a checkpoint";
  const RemovedCheckpointParts removed = RemoveAbandonedCheckpointParts(dir);
  EXPECT_EQ(removed.paths, std::vector<std::string>({dir + "/" + gone}));
  EXPECT_EQ(removed.bytes, 17u);
  for (const std::string& name : kept)
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + name)) << name;
  std::filesystem::remove_all(dir);
}

// Parameters of 1, 4, 3 and 8 floats: the 4 and the 8 (multiples of 16 bytes) first, both
// 16-byte aligned, then the 1 and the 3; in the model's order the 4 would sit 4 bytes off.
TEST(FlatParameters, WholeVectorsComeFirstAndStayAligned) {
  std::vector<torch::Tensor> params = {torch::full({1}, 1.0f), torch::full({4}, 2.0f),
                                       torch::full({3}, 3.0f), torch::full({2, 4}, 4.0f)};
  FlatParameters flat({params});
  auto offset = [&](const torch::Tensor& p) { return FloatsFrom(flat.buffers()[0], p); };
  EXPECT_EQ(offset(params[1]), 0);
  EXPECT_EQ(offset(params[3]), 4);
  EXPECT_EQ(offset(params[0]), 12);
  EXPECT_EQ(offset(params[2]), 13);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(params[3].data_ptr()) % 16, 0u);
  EXPECT_TRUE(torch::equal(params[3], torch::full({2, 4}, 4.0f)));  // values moved along
  // A flat tensor in the model's order: 1 | 2 2 2 2 | 3 3 3 | 4 x 8.
  auto model_order = torch::cat({torch::full({1}, 1.0f), torch::full({4}, 2.0f),
                                 torch::full({3}, 3.0f), torch::full({8}, 4.0f)});
  EXPECT_TRUE(torch::equal(flat.FromModelOrder(0, model_order), flat.buffers()[0].detach()));
  EXPECT_THROW(flat.FromModelOrder(0, torch::zeros({15})), std::invalid_argument);

  std::vector<torch::Tensor> same = {torch::zeros({1}), torch::zeros({4})};
  FlatParameters model_layout({same}, FlatLayout::kModelOrder);
  EXPECT_EQ(FloatsFrom(model_layout.buffers()[0], same[1]), 1);  // 4 bytes off
}

// In a real training step (fmnist-tiny, one forward and backward on the CPU) every LayerNorm is
// given the flat buffer's own views, 16-byte aligned as ATen's vectorised CUDA LayerNorm needs,
// and every whole-vector gradient stays aligned in place; in the model's own order (logit_scale
// first) they sit 4 bytes off. `dtrain-clip check` runs the same step on a GPU, where it also
// sees the kernels.
TEST(FlatParameters, EveryLayerNormOfAStepGetsAlignedVectorsAndGradients) {
  StepAlignment aligned = AlignmentOfAStep(torch::kCPU, FlatLayout::kAligned);
  EXPECT_GT(aligned.layer_norm_modules, 4);
  EXPECT_EQ(aligned.calls, aligned.layer_norm_modules) << "each LayerNorm once a step";
  EXPECT_EQ(aligned.calls_on_parameters, aligned.calls) << "the flat buffer's views, not copies";
  EXPECT_EQ(aligned.calls_aligned, aligned.calls);
  EXPECT_EQ(aligned.gradients_in_place_and_aligned, aligned.whole_vector_parameters);
  StepAlignment model_order = AlignmentOfAStep(torch::kCPU, FlatLayout::kModelOrder);
  EXPECT_EQ(model_order.calls, aligned.calls);
  EXPECT_LT(model_order.calls_aligned, model_order.calls / 2);
  EXPECT_LT(model_order.gradients_in_place_and_aligned, model_order.whole_vector_parameters);
  std::printf("LayerNorm calls aligned: %lld of %lld (model order: %lld); gradients aligned in "
              "place: %lld of %lld (model order: %lld)\n",
              static_cast<long long>(aligned.calls_aligned), static_cast<long long>(aligned.calls),
              static_cast<long long>(model_order.calls_aligned),
              static_cast<long long>(aligned.gradients_in_place_and_aligned),
              static_cast<long long>(aligned.whole_vector_parameters),
              static_cast<long long>(model_order.gradients_in_place_and_aligned));
}

// ReleaseGradients: backward hands its gradients over (none is written into a view), and
// AdoptGradients gathers them into the flat buffers: bit for bit what zeroed views accumulate
// in place, over two backward passes (gradient accumulation) too; a parameter backward did not
// reach gets a zeroed view; every .grad is its view again.
TEST(FlatParameters, ReleasedGradientsGatheredEqualTheZeroedViewsAccumulated) {
  auto make = [] {
    torch::manual_seed(21);
    return std::vector<torch::nn::Linear>{torch::nn::Linear(5, 4), torch::nn::Linear(4, 3),
                                          torch::nn::Linear(3, 2)};
  };
  std::vector<torch::nn::Linear> released = make(), zeroed = make();
  auto flat_of = [](std::vector<torch::nn::Linear>& layers) {
    std::vector<std::vector<torch::Tensor>> groups(2);
    for (auto& layer : layers) {
      groups[0].push_back(layer->bias);
      groups[1].push_back(layer->weight);
    }
    return std::make_unique<FlatParameters>(groups);
  };
  auto flat_released = flat_of(released), flat_zeroed = flat_of(zeroed);
  // The third layer is left out of the loss: backward does not reach it.
  auto backward = [](std::vector<torch::nn::Linear>& layers, int64_t seed) {
    torch::manual_seed(seed);
    torch::Tensor x = torch::randn({6, 5});
    layers[1]->forward(torch::relu(layers[0]->forward(x))).pow(2).sum().backward();
  };
  flat_released->ReleaseGradients();
  for (auto& layer : released) {
    EXPECT_FALSE(layer->weight.grad().defined());
    EXPECT_FALSE(layer->bias.grad().defined());
  }
  flat_zeroed->ZeroGrad();
  for (int64_t seed : {1, 2}) {  // two micro-batches
    backward(released, seed);
    backward(zeroed, seed);
  }
  EXPECT_FALSE(released[0]->weight.grad().is_alias_of(flat_released->buffers()[1].grad()));
  flat_released->AdoptGradients();
  flat_zeroed->AdoptGradients();
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_TRUE(torch::equal(flat_released->buffers()[g].grad(), flat_zeroed->buffers()[g].grad()))
        << "group " << g;
  }
  for (size_t i = 0; i < released.size(); ++i) {
    for (const torch::Tensor& p : {released[i]->weight, released[i]->bias}) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_TRUE(p.grad().is_alias_of(flat_released->buffers()[p.dim() == 2 ? 1 : 0].grad()));
    }
  }
  EXPECT_EQ(released[2]->weight.grad().abs().sum().item<float>(), 0.0f);
  EXPECT_GT(released[0]->weight.grad().abs().sum().item<float>(), 0.0f);
}

// A checkpoint written before the layout was recorded holds AdamW's moments in the model's
// order; converted, each parameter gets its own moments back.
TEST(FlatParameters, MomentsOfAnOlderCheckpointFollowTheirParameters) {
  struct Run {
    torch::nn::Linear model{nullptr};  // weight 15 floats, bias 5: neither a multiple of 4
    torch::Tensor gain;
    std::unique_ptr<FlatParameters> flat;
    std::unique_ptr<torch::optim::AdamW> optimizer;
  };
  auto make = [](FlatLayout layout) {
    auto run = std::make_unique<Run>();
    torch::manual_seed(11);
    run->model = torch::nn::Linear(3, 5);
    run->gain = run->model->register_parameter("gain", torch::ones({4}));
    run->flat = std::make_unique<FlatParameters>(
        std::vector<std::vector<torch::Tensor>>{run->model->parameters()}, layout);
    run->optimizer = std::make_unique<torch::optim::AdamW>(run->flat->buffers(),
                                                           torch::optim::AdamWOptions(1e-2));
    return run;
  };
  auto old_run = make(FlatLayout::kModelOrder);
  for (int step = 0; step < 3; ++step) {
    old_run->flat->ZeroGrad();
    auto x = torch::full({2, 3}, 0.5f * static_cast<float>(step + 1));
    (old_run->model(x) * old_run->gain.sum()).pow(2).sum().backward();
    old_run->optimizer->step();
  }
  const std::string path = TempPath("flat_layout_1");
  SaveCheckpoint(path, *old_run->model, *old_run->optimizer, TrainProgress{}, "tiny");  // no layout

  auto new_run = make(FlatLayout::kAligned);
  int64_t layout = 0;
  LoadCheckpoint(path, *new_run->model, *new_run->optimizer, &layout);
  EXPECT_EQ(layout, 1);
  new_run->flat->MomentsFromModelOrder(*new_run->optimizer);

  auto moments = [](const Run& run) {
    auto& state = static_cast<torch::optim::AdamWParamState&>(
        *run.optimizer->state().at(run.flat->buffers()[0].unsafeGetTensorImpl()));
    return std::make_pair(state.exp_avg(), state.exp_avg_sq());
  };
  auto [old_avg, old_sq] = moments(*old_run);
  auto [new_avg, new_sq] = moments(*new_run);
  const auto params_old = old_run->model->parameters();
  const auto params_new = new_run->model->parameters();
  ASSERT_EQ(params_old.size(), 3u);
  for (size_t i = 0; i < params_old.size(); ++i) {
    const int64_t a = FloatsFrom(old_run->flat->buffers()[0], params_old[i]);
    const int64_t b = FloatsFrom(new_run->flat->buffers()[0], params_new[i]);
    const int64_t n = params_old[i].numel();
    EXPECT_TRUE(torch::equal(new_avg.narrow(0, b, n), old_avg.narrow(0, a, n))) << "param " << i;
    EXPECT_TRUE(torch::equal(new_sq.narrow(0, b, n), old_sq.narrow(0, a, n))) << "param " << i;
    EXPECT_TRUE(torch::equal(params_new[i], params_old[i])) << "param " << i;
  }
  // The gain (4 floats) moved to the front, where the older order had the weight's first four.
  EXPECT_EQ(FloatsFrom(new_run->flat->buffers()[0], new_run->gain), 0);
}

}  // namespace
}  // namespace dtrain::clip
