// --cuda-graphs on the CPU: the CapturedStep's static-buffer logic (copy-in, step, static
// outputs, eager fallback for other shapes) with the real training step of the fmnist-tiny
// model, against the same step run eagerly on the inputs as given; the fused AdamW against
// LibTorch's AdamW; the whole-context text tower; and which runs may take the captured path.
// Nothing here captures a graph: that needs a GPU (bench/clip_gpu.sh measures it).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "runtime/config/model_config.h"
#include "runtime/dist/static_gradient_sync.h"
#include "runtime/dist/train_collectives.h"
#include "runtime/model/clip_model.h"
#include "runtime/train/captured_step.h"
#include "runtime/train/cuda_graphs_choice.h"
#include "runtime/train/flat_parameters.h"
#include "runtime/train/fused_adamw.h"
#include "runtime/train/graph_train_step.h"
#include "runtime/train/step_rig.h"

namespace dtrain::clip {
namespace {

using Rig = StepRig;

// Every tensor the step reads or writes that outlives a step.
std::vector<torch::Tensor> LongLived(const Rig& rig) {
  std::vector<torch::Tensor> all = rig.fused->StateTensors();
  for (const auto& buffer : rig.flat->buffers()) all.push_back(buffer.grad());
  for (const auto& p : rig.model->parameters()) {
    all.push_back(p);
    all.push_back(p.grad());
  }
  return all;
}

std::vector<const void*> Addresses(const std::vector<torch::Tensor>& tensors) {
  std::vector<const void*> addresses;
  for (const auto& t : tensors) addresses.push_back(t.defined() ? t.data_ptr() : nullptr);
  return addresses;
}

void ExpectBitEqual(ClipModel& a, ClipModel& b) {
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i].value(), pb[i].value())) << pa[i].key();
  }
}

// Warm-up, then two replays on copied-in inputs: the parameters after each step are those of the
// same step run eagerly on the inputs as given, bit for bit; every run after the first reads the
// same static input buffers, and nothing long-lived moved.
TEST(CapturedStep, ReplaysOnCopiedInputsEqualTheEagerStepBitForBit) {
  Rig eager(7), staged(7);
  auto eager_step = eager.Step();
  std::vector<std::vector<const void*>> seen_inputs;
  auto staged_step = staged.Step();
  CapturedStep captured(
      [&](const std::vector<torch::Tensor>& inputs) {
        seen_inputs.push_back(Addresses(inputs));
        return staged_step(inputs);
      },
      /*capture=*/false, /*warmup_steps=*/1);
  std::vector<const void*> long_lived;
  for (int step = 0; step < 3; ++step) {
    auto batch = TinyStepInputs(8, 100 + step, 1e-3 * (step + 1));
    torch::Tensor expected_loss = eager_step(batch).at(0);
    torch::Tensor loss = captured.Run(batch).at(0);
    EXPECT_TRUE(torch::equal(loss, expected_loss)) << "step " << step;
    ExpectBitEqual(eager.model, staged.model);
    // The batch itself is never what the step reads: its copy in the static buffers is.
    EXPECT_EQ(seen_inputs.back(), Addresses(captured.static_inputs())) << "step " << step;
    EXPECT_NE(seen_inputs.back(), Addresses(batch)) << "step " << step;
    if (step == 0) {
      long_lived = Addresses(LongLived(staged));
    } else {
      EXPECT_EQ(Addresses(LongLived(staged)), long_lived) << "step " << step;
    }
  }
  EXPECT_EQ(captured.warmup_runs(), 1);
  EXPECT_EQ(captured.replays(), 2);
  EXPECT_EQ(captured.eager_fallbacks(), 0);
  EXPECT_FALSE(captured.captured());
}

// The last partial batch runs eagerly as given (no copy into the static buffers, which keep their
// shape), still the same step; the next full batch goes back to the static buffers.
TEST(CapturedStep, ABatchOfAnotherShapeRunsEagerlyAsGiven) {
  Rig eager(8), staged(8);
  auto eager_step = eager.Step();
  CapturedStep captured(staged.Step(), /*capture=*/false, /*warmup_steps=*/1);
  for (int64_t rows : {8, 8, 5, 8}) {
    auto batch = TinyStepInputs(rows, 200 + rows, 2e-3);
    eager_step(batch);
    captured.Run(batch);
    ExpectBitEqual(eager.model, staged.model);
    EXPECT_EQ(captured.static_inputs().at(0).size(0), 8);
  }
  EXPECT_EQ(captured.eager_fallbacks(), 1);
  EXPECT_EQ(captured.replays(), 2);
}

// With the text cut by the caller (to a TextLengthBucket), each length gets static buffers of its
// own, up to the limit, and stays on them; a length beyond the limit and a partial batch run as
// given. Every step is the same step run eagerly on the inputs as given, bit for bit.
TEST(CapturedStep, EachTextLengthGetsStaticBuffersOfItsOwnUpToTheLimit) {
  Rig eager(10), staged(10);
  auto eager_step = eager.Step(/*bf16=*/false, /*whole_text=*/false);
  std::map<int64_t, std::set<std::vector<const void*>>> read_by_length;
  auto staged_step = staged.Step(false, false);
  CapturedStep captured(
      [&](const std::vector<torch::Tensor>& inputs) {
        read_by_length[inputs.at(1).size(1)].insert(Addresses(inputs));
        return staged_step(inputs);
      },
      /*capture=*/false, /*warmup_steps=*/1, /*max_shapes=*/2);
  const std::vector<std::pair<int64_t, int64_t>> rows_and_length = {
      {8, 16}, {8, 24}, {8, 16}, {8, 32}, {8, 24}, {5, 16}, {8, 16}};
  for (size_t i = 0; i < rows_and_length.size(); ++i) {
    auto batch = TinyStepInputs(rows_and_length[i].first, 500 + i, 1e-3);
    batch[1] = batch[1].narrow(1, 0, rows_and_length[i].second).contiguous();
    torch::Tensor expected_loss = eager_step(batch).at(0);
    torch::Tensor loss = captured.Run(batch).at(0);
    EXPECT_TRUE(torch::equal(loss, expected_loss)) << "step " << i;
    ExpectBitEqual(eager.model, staged.model);
  }
  EXPECT_EQ(captured.shapes(), 2);
  EXPECT_EQ(captured.eager_fallbacks(), 2);  // length 32 (a third shape) and the 5 rows
  EXPECT_EQ(captured.warmup_runs(), 1);      // the first shape's (later ones: on CUDA only)
  EXPECT_EQ(captured.replays(), 4);
  // Lengths 16 and 24 each always read one set of static buffers (the 5-row batch of length 16
  // is read as given: a second set there); the length-32 batch as given.
  EXPECT_EQ(read_by_length[16].size(), 2u);
  EXPECT_EQ(read_by_length[24].size(), 1u);
  EXPECT_EQ(read_by_length[32].size(), 1u);
  EXPECT_EQ(read_by_length[16].count(Addresses(captured.static_inputs())), 1u);
}

// The learning rate is an input: a replay with another rate moves the parameters otherwise.
TEST(CapturedStep, TheLearningRateIsReadFromItsStaticBuffer) {
  Rig a(9), b(9);
  CapturedStep ca(a.Step(), false, 1), cb(b.Step(), false, 1);
  ca.Run(TinyStepInputs(8, 300, 1e-3));
  cb.Run(TinyStepInputs(8, 300, 1e-3));
  ExpectBitEqual(a.model, b.model);
  ca.Run(TinyStepInputs(8, 301, 1e-3));
  cb.Run(TinyStepInputs(8, 301, 5e-3));
  EXPECT_FALSE(torch::equal(a.flat->buffers()[1], b.flat->buffers()[1]));
}

// The fused kernel is AdamW: within float rounding of LibTorch's AdamW over several steps, on the
// same moment tensors, whose step counts SyncStepCounts writes back for checkpoints.
TEST(FusedAdamW, FollowsLibTorchAdamW) {
  torch::manual_seed(11);
  auto make = [] {
    torch::manual_seed(12);
    return std::vector<torch::Tensor>{torch::randn({300}).requires_grad_(),
                                      torch::randn({40}).requires_grad_()};
  };
  auto fused_params = make(), plain_params = make();
  auto options = torch::optim::AdamWOptions(1e-2).betas({0.9, 0.98}).eps(1e-6).weight_decay(0.1);
  torch::optim::AdamW fused_state({fused_params[0], fused_params[1]}, options);
  torch::optim::AdamW plain({plain_params[0], plain_params[1]}, options);
  FusedAdamW fused(fused_state);
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < 2; ++i) {
      auto g = torch::randn_like(fused_params[i]);
      fused_params[i].mutable_grad() = g.clone();
      plain_params[i].mutable_grad() = g.clone();
    }
    fused.Step(torch::full({}, 1e-2));
    plain.step();
  }
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(torch::allclose(fused_params[i], plain_params[i], 1e-5, 1e-6)) << i;
    EXPECT_FALSE(torch::equal(fused_params[i], make()[i])) << "the parameters moved";
  }
  fused.SyncStepCounts();
  auto& state = static_cast<torch::optim::AdamWParamState&>(
      *fused_state.state().at(fused_params[0].unsafeGetTensorImpl()));
  EXPECT_EQ(state.step(), 5);
  auto& plain_state = static_cast<torch::optim::AdamWParamState&>(
      *plain.state().at(plain_params[0].unsafeGetTensorImpl()));
  EXPECT_TRUE(torch::allclose(state.exp_avg_sq(), plain_state.exp_avg_sq(), 1e-5, 1e-8));
}

// A captured step runs the whole context (no host read of the longest caption): the features are
// those of the cut context, within float rounding.
TEST(TextTower, WholeContextGivesTheCutContextsFeatures) {
  torch::manual_seed(13);
  ClipModel model(PresetModelConfig("fmnist-tiny"));
  torch::NoGradGuard no_grad;
  auto tokens = TinyStepInputs(6, 400, 0).at(1);
  torch::Tensor cut = model->EncodeText(tokens);
  model->text->set_whole_context(true);
  torch::Tensor whole = model->EncodeText(tokens);
  EXPECT_TRUE(torch::allclose(cut, whole, 1e-5, 1e-6));
}

// The cut rounded up to a multiple of 8: a handful of lengths for the graphs, the same features.
TEST(TextTower, ABucketedCutGivesTheCutsFeatures) {
  EXPECT_EQ(TextLengthBucket(1, 77), 8);
  EXPECT_EQ(TextLengthBucket(13, 77), 16);
  EXPECT_EQ(TextLengthBucket(16, 77), 16);
  EXPECT_EQ(TextLengthBucket(73, 77), 77);
  EXPECT_EQ(TextLengthBucket(77, 77), 77);
  EXPECT_EQ(TextLengthBuckets(77), 10);
  EXPECT_EQ(TextLengthBuckets(32), 4);
  torch::manual_seed(14);
  ClipModel model(PresetModelConfig("fmnist-tiny"));
  model->text->set_cut_by_caller(true);
  torch::NoGradGuard no_grad;
  auto tokens = TinyStepInputs(6, 401, 0).at(1);
  const std::vector<int64_t> rows(tokens.data_ptr<int64_t>(),
                                  tokens.data_ptr<int64_t>() + tokens.numel());
  const int64_t cut = TextLengthToCut(rows, tokens.size(0), tokens.size(1));
  const int64_t bucket = TextLengthBucket(cut, tokens.size(1));
  ASSERT_GT(bucket, cut);
  torch::Tensor exact = model->EncodeText(tokens.narrow(1, 0, cut));
  torch::Tensor padded = model->EncodeText(tokens.narrow(1, 0, bucket));
  EXPECT_TRUE(torch::allclose(exact, padded, 1e-5, 1e-6));
}

CudaGraphsRun GraphsRun(bool cuda, int world, int accum = 1, double clip = 0,
                        const std::string& backend = "nccl", bool hierarchical = false) {
  CudaGraphsRun run;
  run.cuda = cuda;
  run.world_size = world;
  run.backend = backend;
  run.hierarchical_allreduce = hierarchical;
  run.accum_freq = accum;
  run.grad_clip_norm = clip;
  return run;
}

TEST(CudaGraphsChoice, OffOnAutoByDeviceAndRun) {
  EXPECT_FALSE(ChooseCudaGraphs("off", GraphsRun(true, 1)).static_step);
  CudaGraphsChoice on_gpu = ChooseCudaGraphs("on", GraphsRun(true, 1));
  EXPECT_TRUE(on_gpu.static_step && on_gpu.capture);
  CudaGraphsChoice on_cpu = ChooseCudaGraphs("on", GraphsRun(false, 1));
  EXPECT_TRUE(on_cpu.static_step);
  EXPECT_FALSE(on_cpu.capture);
  EXPECT_TRUE(ChooseCudaGraphs("auto", GraphsRun(true, 1)).capture);
  EXPECT_FALSE(ChooseCudaGraphs("auto", GraphsRun(false, 1)).static_step);
  // More than one rank: captured with NCCL, never with Gloo on CUDA; on the CPU the static step
  // runs eagerly with Gloo.
  CudaGraphsChoice nccl = ChooseCudaGraphs("auto", GraphsRun(true, 2));
  EXPECT_TRUE(nccl.static_step && nccl.capture);
  EXPECT_NE(nccl.note.find("fixed sequence of nccl allreduces"), std::string::npos) << nccl.note;
  CudaGraphsChoice gloo_gpu = ChooseCudaGraphs("auto", GraphsRun(true, 2, 1, 0, "gloo"));
  EXPECT_FALSE(gloo_gpu.static_step);
  EXPECT_NE(gloo_gpu.note.find("only NCCL"), std::string::npos) << gloo_gpu.note;
  EXPECT_THROW(ChooseCudaGraphs("on", GraphsRun(true, 2, 1, 0, "gloo")), std::runtime_error);
  CudaGraphsChoice gloo_cpu = ChooseCudaGraphs("on", GraphsRun(false, 2, 1, 0, "gloo"));
  EXPECT_TRUE(gloo_cpu.static_step);
  EXPECT_FALSE(gloo_cpu.capture);
  EXPECT_FALSE(ChooseCudaGraphs("auto", GraphsRun(true, 2, 1, 0, "nccl", true)).static_step);
  EXPECT_TRUE(ChooseCudaGraphs("auto", GraphsRun(true, 1, 1, 0, "", true)).capture);
  EXPECT_FALSE(ChooseCudaGraphs("auto", GraphsRun(true, 1, 2)).static_step);
  EXPECT_FALSE(ChooseCudaGraphs("auto", GraphsRun(true, 1, 1, 1.0)).static_step);
  EXPECT_THROW(ChooseCudaGraphs("on", GraphsRun(true, 1, 4)), std::runtime_error);
  EXPECT_THROW(ChooseCudaGraphs("on", GraphsRun(false, 1, 1, 0.5)), std::runtime_error);
}

// The fixed buckets: every element of every buffer in exactly one bucket, buffers last to first
// and each from its end (backward's order), no bucket over the threshold.
TEST(StaticBuckets, CoverEveryElementOnceInBackwardOrder) {
  const std::vector<int64_t> numels = {10, 7, 1};
  const std::vector<int64_t> bytes = {4, 2, 4};
  std::vector<StaticBucket> cut = CutStaticBuckets(numels, bytes, 12);
  ASSERT_FALSE(cut.empty());
  EXPECT_EQ(cut.front().buffer, 2u);
  std::vector<std::vector<int>> seen = {std::vector<int>(10), std::vector<int>(7),
                                        std::vector<int>(1)};
  size_t last_buffer = cut.front().buffer;
  for (const StaticBucket& b : cut) {
    EXPECT_LE(b.numel * bytes[b.buffer], 12);
    EXPECT_GE(b.numel, 1);
    EXPECT_LE(b.buffer, last_buffer);
    last_buffer = b.buffer;
    for (int64_t i = b.offset; i < b.offset + b.numel; ++i) ++seen[b.buffer][i];
  }
  for (const auto& buffer : seen) EXPECT_EQ(buffer, std::vector<int>(buffer.size(), 1));
  EXPECT_EQ(cut.size(), 1u + 2u + 4u);  // 1 element; 7 of 2 bytes by 6; 10 of 4 bytes by 3
  EXPECT_EQ(cut[1].offset, 1);          // buffer 1 from its end: [1, 7) then [0, 1)
  EXPECT_EQ(CutStaticBuckets(numels, bytes, 0).size(), 3u);
  EXPECT_EQ(CutStaticBuckets(numels, bytes, 1).size(), 18u);  // below one element: one each
}

}  // namespace
}  // namespace dtrain::clip
