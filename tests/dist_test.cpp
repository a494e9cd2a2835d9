// Multi-process tests of dtrain-clip's distributed runtime: real ranks (dist_worker processes) on
// Gloo over loopback, compared with one process computing the same thing on the whole batch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/dist/dist_env.h"
#include "runtime/dist/distributed_clip_loss.h"
#include "tests/support/dist_ranks.h"
#include "tests/support/dist_tiny_clip.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/test_paths.h"

namespace dtrain::clip {
namespace {

const std::string kWorker = std::string(DTRAIN_BINARY_DIR) + "/dist_worker";
constexpr int64_t kRowsPerRank = 6;  // as in dist_worker.cpp

std::string TempDir() {
  return dtrain::testing::ScratchDirs::Make("dtrain-dist");
}

// Runs `world` ranks of dist_worker with `args` (where "OUT" becomes a fresh folder) and expects
// all to succeed; returns the folder with rank-R.pt.
std::string RunRanks(std::vector<std::string> args, int world, int local_world = 0) {
  std::string out = TempDir();
  for (auto& a : args) {
    if (a == "OUT") a = out;
  }
  testing::RankProcesses ranks;
  std::vector<int> all;
  for (int r = 0; r < world; ++r) all.push_back(r);
  ranks.Start(kWorker, args, world, local_world ? local_world : world, all, out);
  std::vector<int> codes = ranks.Wait(std::chrono::seconds(90));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(codes[r], 0) << "rank " << r << " log:\n" << ranks.Log(r);
  }
  return out;
}

std::vector<torch::Tensor> Load(const std::string& out, int rank) {
  std::vector<torch::Tensor> tensors;
  torch::load(tensors, out + "/rank-" + std::to_string(rank) + ".pt");
  return tensors;
}

double RelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a - b).abs().max().item<double>() / scale;
}

// One process, the whole batch: the gradients distributed training must reproduce.
std::vector<torch::Tensor> SingleProcessGradients(int world) {
  testing::TinyClip model;
  auto [images, texts] = testing::GlobalBatch(kRowsPerRank * world);
  auto [image_f, text_f] = model->forward(images, texts);
  ClipLossAcrossRanks(image_f, text_f, model->logit_scale.exp(), nullptr, {}).backward();
  std::vector<torch::Tensor> grads;
  for (auto& p : model->parameters()) grads.push_back(p.grad());
  return grads;
}

// Largest relative difference, over parameters and ranks, from the single-process gradients.
// `seeded`: backward seeded with 1/world size and the synchroniser only summing (the trainer's
// way); otherwise a plain backward and the synchroniser dividing the sum.
double WorstGradientDifference(const std::string& mode, int world, bool seeded = false) {
  std::vector<std::string> args = {"loss", mode, "OUT", std::to_string(64 << 20)};
  if (seeded) args.push_back("seeded");
  std::string out = RunRanks(args, world);
  std::vector<torch::Tensor> reference = SingleProcessGradients(world);
  double worst = 0;
  for (int r = 0; r < world; ++r) {
    std::vector<torch::Tensor> grads = Load(out, r);
    EXPECT_EQ(grads.size(), reference.size());
    for (size_t i = 0; i < grads.size() && i < reference.size(); ++i) {
      worst = std::max(worst, RelativeDifference(grads[i], reference[i]));
    }
  }
  return worst;
}

class GatherWithGrad : public ::testing::TestWithParam<std::tuple<std::string, int, bool>> {};

TEST_P(GatherWithGrad, GradientsEqualOneProcessOnTheWholeBatch) {
  auto [mode, world, seeded] = GetParam();
  EXPECT_LE(WorstGradientDifference(mode, world, seeded), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Dist, GatherWithGrad,
                         ::testing::Combine(::testing::Values("global", "local"),
                                            ::testing::Values(2, 4), ::testing::Bool()));

// Why --gather-with-grad exists: with a plain gather the other ranks' features are constants, so
// each rank loses the gradient its features get from every other rank's loss terms. Training
// then silently learns something else (for the global loss, gradients 1/world of the true ones).
TEST(Dist, PlainGatherGivesDifferentGradients) {
  EXPECT_GT(WorstGradientDifference("nograd", 2), 0.1);
  EXPECT_GT(WorstGradientDifference("nograd-local", 2), 0.1);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

constexpr int64_t kSyncTensors = 8;        // as in dist_worker.cpp's RunSync
constexpr int64_t kSyncBytes = 30217 * 4;  // their float32 bytes
enum class Layout { kSeparate, kFlat };

// What one rank's synchroniser did (the numbers dist_worker saves after the gradients).
struct SyncCounts {
  int64_t allreduces, bytes_in_place, bytes_copied, views;
};

// The synchronised gradients must be the mean over ranks that a direct allreduce computes, and
// the timeline must say what happened: fusion-buffer copies appear exactly when bytes were
// copied. Returns rank 0's counts.
SyncCounts ExpectSyncMatchesDirectAllreduce(const std::string& out, int world,
                                            bool one_allreduce_per_tensor) {
  SyncCounts rank0{};
  for (int r = 0; r < world; ++r) {
    std::vector<torch::Tensor> saved = Load(out, r);
    if (saved.size() != static_cast<size_t>(2 * kSyncTensors + 1)) {
      ADD_FAILURE() << "rank " << r << " saved " << saved.size() << " tensors";
      return rank0;
    }
    for (int64_t i = 0; i < kSyncTensors; ++i) {
      EXPECT_LE(RelativeDifference(saved[2 * i], saved[2 * i + 1]), 1e-6) << "tensor " << i;
    }
    torch::Tensor counts = saved.back();
    SyncCounts c{counts[0].item<int64_t>(), counts[1].item<int64_t>(), counts[2].item<int64_t>(),
                 counts[3].item<int64_t>()};
    if (one_allreduce_per_tensor) {
      EXPECT_EQ(c.allreduces, kSyncTensors);
    } else {
      EXPECT_LE(c.allreduces, kSyncTensors);
    }
    EXPECT_EQ(c.bytes_in_place + c.bytes_copied, kSyncBytes) << "rank " << r;
    std::string timeline = ReadFile(out + "/timeline-" + std::to_string(r) + ".json");
    EXPECT_NE(timeline.find("GLOO_ALLREDUCE"), std::string::npos) << "rank " << r;
    EXPECT_EQ(timeline.find("MEMCPY_IN_FUSION_BUFFER") != std::string::npos, c.bytes_copied > 0)
        << "rank " << r << ": " << c.bytes_copied << " bytes copied, timeline:\n"
        << timeline;
    EXPECT_EQ(timeline.find("MEMCPY_OUT_FUSION_BUFFER") != std::string::npos, c.bytes_copied > 0);
    if (r == 0) rank0 = c;
  }
  return rank0;
}

std::string SyncRun(int64_t fusion_bytes, int accum, Layout layout, int world = 2,
                    int local_world = 0, bool hierarchical = false, bool seeded = false) {
  std::vector<std::string> args = {"sync",
                                   "OUT",
                                   std::to_string(fusion_bytes),
                                   std::to_string(accum),
                                   hierarchical ? "1" : "0",
                                   layout == Layout::kFlat ? "flat" : "separate"};
  if (seeded) args.push_back("seeded");
  return RunRanks(args, world, local_world);
}

TEST(Dist, FusionThresholdZeroAndPositiveMatchDirectAllreduce) {
  ExpectSyncMatchesDirectAllreduce(SyncRun(0, 1, Layout::kSeparate), 2, true);
  ExpectSyncMatchesDirectAllreduce(SyncRun(65536, 1, Layout::kSeparate), 2, false);
  ExpectSyncMatchesDirectAllreduce(SyncRun(64 << 20, 1, Layout::kSeparate), 2, false);
}

TEST(Dist, AccumFreqSendsTheSumOfAllMicroBatchesOnce) {
  ExpectSyncMatchesDirectAllreduce(SyncRun(65536, 3, Layout::kSeparate), 2, false);
}

TEST(Dist, HierarchicalAllreduceEqualsFlatOnTwoNodesOfTwo) {
  ExpectSyncMatchesDirectAllreduce(SyncRun(64 << 20, 1, Layout::kSeparate, 4, 2, true), 4, false);
}

// Gradients in flat buffers (as the trainer keeps them) are allreduced in place, as views of the
// buffer: nothing copied, no MEMCPY spans, and every .grad is still its view of the buffer.
TEST(Dist, FlatGradientsAreReducedInPlaceWithoutCopies) {
  for (auto [fusion, accum] : {std::pair<int64_t, int>{0, 1}, {65536, 3}, {64 << 20, 1}}) {
    SCOPED_TRACE("fusion threshold " + std::to_string(fusion) + ", accum " + std::to_string(accum));
    SyncCounts c =
        ExpectSyncMatchesDirectAllreduce(SyncRun(fusion, accum, Layout::kFlat), 2, fusion == 0);
    EXPECT_EQ(c.bytes_copied, 0);
    EXPECT_EQ(c.bytes_in_place, kSyncBytes);
    EXPECT_EQ(c.views, kSyncTensors);
  }
}

// dtrain-clip seeds backward with 1/world size, so the synchroniser only sums: through the
// fusion buffer (copied out without dividing), in place, and hierarchically, the result is
// still the mean a direct allreduce computes.
TEST(Dist, SeededBackwardIsOnlySummed) {
  ExpectSyncMatchesDirectAllreduce(
      SyncRun(65536, 1, Layout::kSeparate, 2, 0, /*hierarchical=*/false, /*seeded=*/true), 2,
      false);
  ExpectSyncMatchesDirectAllreduce(
      SyncRun(65536, 3, Layout::kFlat, 2, 0, /*hierarchical=*/false, /*seeded=*/true), 2, false);
  ExpectSyncMatchesDirectAllreduce(
      SyncRun(64 << 20, 1, Layout::kSeparate, 4, 2, /*hierarchical=*/true, /*seeded=*/true), 4,
      false);
}

// Buckets as dist_worker's BucketsAsTensor writes them: indices, -1 after each bucket.
std::vector<std::vector<int64_t>> BucketsOf(const torch::Tensor& flat) {
  std::vector<std::vector<int64_t>> buckets(1);
  for (int64_t i = 0; i < flat.numel(); ++i) {
    int64_t index = flat[i].item<int64_t>();
    if (index < 0) {
      buckets.emplace_back();
    } else {
      buckets.back().push_back(index);
    }
  }
  buckets.pop_back();
  return buckets;
}

// Gradients allreduced while backward runs (hooks per parameter, a bucket issued once every
// rank has its gradients) against the same step with everything sent after backward: the
// averaged gradients are the same bit for bit; every rank issues the same buckets in the same
// order, each gradient in exactly one bucket per step; the overlapped pass issued a collective
// before backward was over and the other none. (The overlapped pass's buckets are the planner's
// cut of each round's ready set, so how many there are depends on timing; the after-backward
// pass plans all gradients at once.)
TEST(Dist, OverlappedBucketsGiveTheSyncAfterBackwardResultBitForBit) {
  for (auto [fusion, layout] : {std::pair<int64_t, const char*>{0, "separate"},
                                {64 << 20, "separate"},
                                {1024, "flat"},
                                {64 << 20, "flat"}}) {
    SCOPED_TRACE(std::string(layout) + ", fusion threshold " + std::to_string(fusion));
    std::string out = RunRanks({"overlap", "OUT", std::to_string(fusion), layout}, 2);
    std::vector<std::vector<torch::Tensor>> saved = {Load(out, 0), Load(out, 1)};
    ASSERT_EQ(saved[0].size(), saved[1].size());
    ASSERT_GE(saved[0].size(), 3u);
    const size_t params = (saved[0].size() - 3) / 2;
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < params; ++i) {
        EXPECT_TRUE(torch::equal(saved[r][2 * i], saved[r][2 * i + 1]))
            << "rank " << r << " parameter " << i
            << ": the overlapped and after-backward averages differ";
      }
      torch::Tensor seen = saved[r].back();
      EXPECT_GT(seen[0].item<int64_t>(), 0) << "rank " << r << ": no collective during backward";
      EXPECT_EQ(seen[1].item<int64_t>(), 0) << "rank " << r;
    }
    for (size_t pass = 0; pass < 2; ++pass) {
      auto buckets = BucketsOf(saved[0][2 * params + pass]);
      EXPECT_EQ(buckets, BucketsOf(saved[1][2 * params + pass])) << "pass " << pass;
      std::vector<int> times(params, 0);
      for (const auto& bucket : buckets) {
        for (int64_t index : bucket) {
          ASSERT_LT(static_cast<size_t>(index), params);
          ++times[index];
        }
      }
      EXPECT_EQ(times, std::vector<int>(params, 1)) << "pass " << pass;
      if (fusion == 0) EXPECT_EQ(buckets.size(), params) << "pass " << pass;
    }
    // The overlapped pass needs more than the one round the after-backward pass plans.
    EXPECT_GT(BucketsOf(saved[0][2 * params]).size(), 1u);
  }
}

TEST(Dist, RendezvousTimeoutNamesTheMissingRank) {
  std::string out = TempDir();
  testing::RankProcesses ranks;
  ranks.Start(kWorker, {"rendezvous", "6000"}, 3, 3, {0, 2}, out);
  std::vector<int> codes = ranks.Wait(std::chrono::seconds(60));
  EXPECT_EQ(codes[0], 1);
  EXPECT_EQ(codes[1], 1);
  EXPECT_NE(ranks.Log(0).find("missing ranks: 1 of 3"), std::string::npos) << ranks.Log(0);
  EXPECT_NE(ranks.Log(1).find("missing ranks: 1 of 3"), std::string::npos) << ranks.Log(1);
}

TEST(Dist, RendezvousSucceedsAndMeasuresClockOffset) {
  std::string out = TempDir();
  testing::RankProcesses ranks;
  ranks.Start(kWorker, {"rendezvous", "30000"}, 2, 2, {0, 1}, out);
  std::vector<int> codes = ranks.Wait(std::chrono::seconds(60));
  EXPECT_EQ(codes[0], 0) << ranks.Log(0);
  EXPECT_EQ(codes[1], 0) << ranks.Log(1);
  EXPECT_NE(ranks.Log(1).find("rank 1 arrived; clock offset"), std::string::npos);
}

DistEnv EnvOf(std::map<std::string, std::string> vars) {
  return ReadDistEnv([&](const std::string& name) { return vars.count(name) ? vars[name] : ""; });
}

TEST(DistEnv, TorchrunNamesWinOverHorovodAndSlurm) {
  DistEnv env = EnvOf({{"RANK", "3"},
                       {"WORLD_SIZE", "4"},
                       {"LOCAL_RANK", "1"},
                       {"LOCAL_WORLD_SIZE", "2"},
                       {"HOROVOD_RANK", "0"},
                       {"HOROVOD_SIZE", "8"},
                       {"SLURM_PROCID", "5"},
                       {"SLURM_NTASKS", "6"},
                       {"MASTER_PORT", "1234"}});
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.node(), 1);
  EXPECT_EQ(env.nodes(), 2);
  EXPECT_EQ(env.master_port, 1234);
}

TEST(DistEnv, FallsBackThroughHorovodOpenMpiPmiSlurm) {
  EXPECT_EQ(EnvOf({{"HOROVOD_RANK", "1"}, {"HOROVOD_SIZE", "2"}}).source, "horovod");
  EXPECT_EQ(EnvOf({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}).source,
            "openmpi");
  EXPECT_EQ(EnvOf({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}).source, "pmi");
  DistEnv slurm = EnvOf({{"SLURM_PROCID", "3"},
                         {"SLURM_NTASKS", "4"},
                         {"SLURM_LOCALID", "1"},
                         {"SLURM_NTASKS_PER_NODE", "2(x2)"}});
  EXPECT_EQ(slurm.source, "slurm");
  EXPECT_EQ(slurm.rank, 3);
  EXPECT_EQ(slurm.local_world_size, 2);
  EXPECT_EQ(EnvOf({}).world_size, 1);
}

TEST(DistEnv, BadValuesNameTheVariable) {
  try {
    EnvOf({{"RANK", "x"}, {"WORLD_SIZE", "2"}});
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("RANK='x'"), std::string::npos);
  }
  EXPECT_THROW(EnvOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), std::runtime_error);
}

}  // namespace
}  // namespace dtrain::clip
