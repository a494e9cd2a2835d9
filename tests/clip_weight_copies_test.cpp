// WeightCopies: the bfloat16 copies of the matrix weights a bf16-autocast step uses instead of
// autocast's cast at each use. A real fmnist-tiny step on the CPU: the same loss and the same
// float32 gradients bit for bit, the gradients made on the copies (none on the parameters), and
// the copies refreshed from the parameters' values when a scope opens.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <string>
#include <vector>

#include "runtime/config/model_config.h"
#include "runtime/model/clip_loss.h"
#include "runtime/model/clip_model.h"
#include "runtime/model/weight_copies.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/train/captured_step.h"
#include "runtime/train/flat_parameters.h"
#include "runtime/train/step_rig.h"

namespace dtrain::clip {
namespace {

struct StepSetup {
  ClipModel model{nullptr};
  std::unique_ptr<FlatParameters> flat;
};

StepSetup MakeSetup() {
  torch::manual_seed(11);
  StepSetup s;
  s.model = ClipModel(PresetModelConfig("fmnist-tiny"));
  s.flat = std::make_unique<FlatParameters>(WeightDecayGroups(*s.model));
  return s;
}

torch::Tensor Tokens(int64_t batch) {
  auto tokens = torch::zeros({batch, 32}, torch::kLong);
  for (int64_t b = 0; b < batch; ++b) {
    tokens[b][0] = 257;
    for (int64_t i = 1; i <= 3 + b % 4; ++i) tokens[b][i] = 10 + (b * 7 + i * 3) % 240;
    tokens[b][4 + b % 4] = 258;
  }
  return tokens;
}

// One bf16-autocast forward and backward (the trainer's eager step on one rank), its loss.
torch::Tensor Step(StepSetup& s, WeightCopies* copies, const torch::Tensor& images,
                   const torch::Tensor& tokens) {
  s.flat->ReleaseGradients();
  torch::Tensor loss;
  {
    AutocastScope autocast(true, torch::kCPU);
    WeightCopies::Scope scope(copies);
    ClipOutput out = s.model->forward(images, tokens);
    loss = ContrastiveLoss(out.image_features, out.text_features, out.logit_scale);
  }
  loss.backward();
  return loss.detach();
}

TEST(WeightCopies, MatrixWeightsAreTheProjectionsNotTheNormsOrEmbeddings) {
  StepSetup s = MakeSetup();
  std::set<const void*> listed;
  for (const torch::Tensor& p : MatrixWeights(*s.model)) listed.insert(p.unsafeGetTensorImpl());
  std::set<std::string> in, out;
  for (const auto& item : s.model->named_parameters()) {
    (listed.count(item.value().unsafeGetTensorImpl()) ? in : out).insert(item.key());
  }
  for (const char* name : {"visual.conv1.weight", "visual.proj", "text.text_projection",
                           "visual.transformer.resblocks.0.attn.in_proj_weight",
                           "visual.transformer.resblocks.0.attn.in_proj_bias",
                           "text.transformer.resblocks.1.attn.out_proj.bias",
                           "text.transformer.resblocks.1.mlp.c_fc.weight",
                           "text.transformer.resblocks.1.mlp.c_proj.bias"}) {
    EXPECT_TRUE(in.count(name)) << name;
  }
  for (const char* name :
       {"visual.ln_pre.weight", "visual.class_embedding", "visual.positional_embedding",
        "text.token_embedding.weight", "text.transformer.resblocks.0.ln_1.bias", "logit_scale"}) {
    EXPECT_TRUE(out.count(name)) << name;
  }
}

// The step with copies against the step with autocast's casts, from the same weights and batch:
// losses and every float32 gradient equal bit for bit once AdoptGradients has gathered them.
TEST(WeightCopies, AStepGivesAutocastsLossAndGradientsBitForBit) {
  StepSetup cast = MakeSetup(), copied = MakeSetup();
  WeightCopies copies(MatrixWeights(*copied.model), torch::kBFloat16);
  ASSERT_EQ(copies.size(), MatrixWeights(*copied.model).size());
  torch::manual_seed(5);
  const torch::Tensor images = torch::randn({6, 1, 28, 28});
  const torch::Tensor tokens = Tokens(6);
  for (int round = 0; round < 2; ++round) {  // the second from copies refreshed after an update
    const torch::Tensor loss_cast = Step(cast, nullptr, images, tokens);
    const torch::Tensor loss_copied = Step(copied, &copies, images, tokens);
    EXPECT_TRUE(torch::equal(loss_cast, loss_copied)) << loss_cast << " " << loss_copied;
    // Backward reached the copies, not the float32 parameters they stand for.
    for (const torch::Tensor& p : MatrixWeights(*copied.model)) {
      EXPECT_FALSE(p.grad().defined());
      const torch::Tensor copy = copies.CopyOf(p);
      ASSERT_TRUE(copy.defined());
      ASSERT_TRUE(copy.grad().defined());
      EXPECT_EQ(copy.grad().scalar_type(), torch::kBFloat16);
    }
    copies.HandOverGradients();
    for (const torch::Tensor& p : MatrixWeights(*copied.model)) {
      EXPECT_FALSE(copies.CopyOf(p).grad().defined());
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.grad().scalar_type(), torch::kBFloat16);
    }
    cast.flat->AdoptGradients();
    copied.flat->AdoptGradients();
    for (size_t g = 0; g < 2; ++g) {
      const torch::Tensor a = cast.flat->buffers()[g].grad(), b = copied.flat->buffers()[g].grad();
      EXPECT_TRUE(torch::equal(a, b))
          << "group " << g << ": max difference " << (a - b).abs().max().item<float>();
      EXPECT_GT(a.abs().sum().item<float>(), 0.0f);
    }
    // A plain SGD update on both: the next round's copies must follow the new values.
    torch::NoGradGuard no_grad;
    for (StepSetup* s : {&cast, &copied}) {
      for (const torch::Tensor& buffer : s->flat->buffers()) buffer.sub_(buffer.grad() * 0.5);
    }
  }
}

// With ranks or micro-batches: each copy's gradient is added into its float32 gradient as
// backward makes it (the callback sees it complete, during backward), and over two micro-batches
// the float32 gradients equal those autocast's widened gradients add up to in zeroed views.
TEST(WeightCopies, GradientsAddedAsBackwardMakesThemSumLikeAutocastsOverMicroBatches) {
  StepSetup cast = MakeSetup(), copied = MakeSetup();
  WeightCopies copies(MatrixWeights(*copied.model), torch::kBFloat16);
  std::set<const void*> added;
  bool inside_backward = false;
  int added_outside = 0;
  copies.AddGradientsIntoParameters([&](const torch::Tensor& parameter) {
    ASSERT_TRUE(parameter.grad().defined());
    EXPECT_EQ(parameter.grad().scalar_type(), torch::kFloat);
    added.insert(parameter.unsafeGetTensorImpl());
    if (!inside_backward) ++added_outside;
  });
  cast.flat->ZeroGrad();
  copied.flat->ZeroGrad();       // views, added into (as with ranks)
  for (int64_t seed : {5, 6}) {  // two micro-batches
    torch::manual_seed(seed);
    const torch::Tensor images = torch::randn({6, 1, 28, 28});
    const torch::Tensor tokens = Tokens(6);
    for (StepSetup* s : {&cast, &copied}) {
      torch::Tensor loss;
      {
        AutocastScope autocast(true, torch::kCPU);
        WeightCopies::Scope scope(s == &copied ? &copies : nullptr);
        ClipOutput out = s->model->forward(images, tokens);
        loss = ContrastiveLoss(out.image_features, out.text_features, out.logit_scale);
      }
      inside_backward = true;
      loss.backward();
      inside_backward = false;
    }
    EXPECT_EQ(added.size(), copies.size()) << "every copied parameter, during backward";
    added.clear();
    for (const torch::Tensor& p : MatrixWeights(*copied.model)) {
      EXPECT_FALSE(copies.CopyOf(p).grad().defined());
    }
  }
  EXPECT_EQ(added_outside, 0);
  copies.HandOverGradients();  // nothing left to hand over
  cast.flat->AdoptGradients();
  copied.flat->AdoptGradients();
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_TRUE(torch::equal(cast.flat->buffers()[g].grad(), copied.flat->buffers()[g].grad()))
        << "group " << g;
  }
  // Every .grad is still its flat view: added in place, not replaced.
  for (const torch::Tensor& p : MatrixWeights(*copied.model)) {
    EXPECT_TRUE(p.grad().is_alias_of(copied.flat->buffers()[p.dim() >= 2 ? 1 : 0].grad()));
  }
}

// --cuda-graphs' step with the copies (gradients unset, handed over and gathered inside the
// step), replayed from static buffers, against the eager step with autocast's casts: bit for bit
// over four bf16 steps with the fused AdamW, a partial batch among them.
TEST(WeightCopies, TheCapturedStepWithCopiesGivesAutocastsStepBitForBit) {
  StepRig cast(9), copied(9);
  auto cast_step = cast.Step(/*bf16=*/true, /*whole_text=*/true, /*weight_copies=*/false);
  CapturedStep captured(copied.Step(/*bf16=*/true, /*whole_text=*/true, /*weight_copies=*/true),
                        /*capture=*/false, /*warmup_steps=*/1);
  ASSERT_TRUE(copied.copies);
  EXPECT_FALSE(cast.copies);
  for (int64_t rows : {8, 8, 5, 8}) {
    const std::vector<torch::Tensor> batch = TinyStepInputs(rows, 300 + rows, 1e-3);
    const torch::Tensor expected = cast_step(batch).at(0).clone();
    const torch::Tensor loss = captured.Run(batch).at(0).clone();
    EXPECT_TRUE(torch::equal(loss, expected)) << rows << " rows";
    auto a = cast.model->named_parameters(), b = copied.model->named_parameters();
    for (const auto& item : a) {
      EXPECT_TRUE(torch::equal(item.value(), b[item.key()])) << item.key() << ", " << rows;
      // Every gradient is its flat view again after the step.
      EXPECT_EQ(b[item.key()].grad().scalar_type(), torch::kFloat) << item.key();
    }
  }
  EXPECT_EQ(captured.replays(), 2);
  EXPECT_EQ(captured.eager_fallbacks(), 1);
}

TEST(WeightCopies, AScopeRefreshesTheCopiesAndOnlyAScopeUsesThem) {
  StepSetup s = MakeSetup();
  const torch::Tensor proj = s.model->visual->proj;
  WeightCopies copies(MatrixWeights(*s.model), torch::kBFloat16);
  EXPECT_TRUE(UseWeightCopy(proj).is_same(proj));
  {
    torch::NoGradGuard no_grad;
    proj.fill_(0.3f);
  }
  {
    WeightCopies::Scope scope(&copies);
    const torch::Tensor& used = UseWeightCopy(proj);
    EXPECT_TRUE(used.is_same(copies.CopyOf(proj)));
    EXPECT_EQ(used.scalar_type(), torch::kBFloat16);
    EXPECT_TRUE(torch::equal(used, proj.to(torch::kBFloat16)));
    // A parameter without a copy is itself.
    EXPECT_TRUE(UseWeightCopy(s.model->logit_scale).is_same(s.model->logit_scale));
    EXPECT_THROW(WeightCopies::Scope again(&copies), std::logic_error);
  }
  EXPECT_TRUE(UseWeightCopy(proj).is_same(proj));
  // Without a refresh (a later scope of the same step) the copies keep the values they had.
  {
    torch::NoGradGuard no_grad;
    proj.fill_(0.7f);
  }
  {
    WeightCopies::Scope scope(&copies, /*refresh=*/false);
    EXPECT_TRUE(torch::equal(UseWeightCopy(proj), torch::full_like(copies.CopyOf(proj), 0.3f)));
  }
  // No copies: a scope that does nothing.
  {
    WeightCopies::Scope scope(nullptr);
    EXPECT_TRUE(UseWeightCopy(proj).is_same(proj));
  }
  EXPECT_THROW(WeightCopies({proj, proj}, torch::kBFloat16), std::invalid_argument);
}

}  // namespace
}  // namespace dtrain::clip
