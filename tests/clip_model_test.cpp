// The CLIP model's towers, loss, schedule and config reader: shapes, invariants, and values
// computed by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "runtime/config/model_config.h"
#include "runtime/model/clip_loss.h"
#include "runtime/model/clip_model.h"
#include "runtime/model/linear_rows.h"
#include "runtime/model/self_attention.h"
#include "runtime/train/autocast_scope.h"
#include "runtime/train/lr_schedule.h"

namespace dtrain::clip {
namespace {

bool Close(const torch::Tensor& a, const torch::Tensor& b, double tol = 1e-5) {
  return torch::allclose(a, b, tol, tol);
}

TEST(Transformer, PooledLastBlockEqualsFullBlockAtThoseRows) {
  torch::manual_seed(1);
  ResidualAttentionBlock block(16, 4, 4.0);
  auto x = torch::randn({3, 7, 16});
  auto rows = torch::tensor({0, 6, 3}, torch::kLong);
  auto arange = torch::arange(3, torch::kLong);
  auto full = block->forward(x, torch::Tensor()).index({arange, rows});
  EXPECT_TRUE(Close(block->ForwardRows(x, rows, false), full));
  auto causal = torch::full({7, 7}, -INFINITY).triu_(1);
  auto full_causal = block->forward(x, causal).index({arange, rows});
  EXPECT_TRUE(Close(block->ForwardRows(x, rows, true), full_causal));
}

// LinearRows is one autograd node whose value and gradients are those of addmm over the rows
// with its views (what it replaced), bit for bit: in float32, under bfloat16 autocast, for a
// non-contiguous input and for row slices of a weight; its output can be modified in place.
TEST(LinearRows, OneNodeWithTheValuesAndGradientsOfAddmmOverTheRows) {
  for (const bool bf16 : {false, true}) {
    for (const bool strided : {false, true}) {
      torch::manual_seed(4);
      auto base = torch::randn({5, 3, 8});
      auto weight_all = torch::randn({12, 8}, torch::requires_grad());
      auto bias_all = torch::randn({12}, torch::requires_grad());
      const auto upstream = torch::randn({3, 5, 6});
      struct Result {
        torch::Tensor value, grad_x, grad_weight, grad_bias;
        std::string node;
      };
      auto run = [&](bool fused) {
        for (auto* t : {&weight_all, &bias_all}) t->mutable_grad() = torch::Tensor();
        auto x = (strided ? base.transpose(0, 1) : base.transpose(0, 1).contiguous())
                     .detach()
                     .requires_grad_(true);
        auto weight = weight_all.narrow(0, 6, 6), bias = bias_all.narrow(0, 6, 6);
        torch::Tensor y;
        {
          AutocastScope autocast(bf16, torch::kCPU);
          y = fused ? LinearRows(x, weight, bias)
                    : torch::addmm(bias, x.reshape({-1, 8}), weight.t()).view({3, 5, 6});
        }
        Result r{y.detach().clone(), {}, {}, {}, y.grad_fn()->name()};
        (y.to(torch::kFloat) * upstream).sum().backward();
        r.grad_x = x.grad();
        r.grad_weight = weight_all.grad();
        r.grad_bias = bias_all.grad();
        return r;
      };
      const Result fused = run(true), reference = run(false);
      const std::string what = std::string(bf16 ? "bf16" : "fp32") + (strided ? " strided" : "");
      EXPECT_NE(fused.node.find("LinearRowsFunction"), std::string::npos) << fused.node;
      EXPECT_EQ(fused.value.scalar_type(), bf16 ? torch::kBFloat16 : torch::kFloat) << what;
      EXPECT_TRUE(torch::equal(fused.value, reference.value)) << what;
      EXPECT_TRUE(torch::equal(fused.grad_x, reference.grad_x)) << what;
      EXPECT_TRUE(torch::equal(fused.grad_weight, reference.grad_weight)) << what;
      EXPECT_TRUE(torch::equal(fused.grad_bias, reference.grad_bias)) << what;
      EXPECT_EQ(fused.grad_weight.narrow(0, 0, 6).abs().sum().item<float>(), 0.0f);
    }
  }
  // One node: its edges lead to the three inputs' accumulators, no view or transpose between.
  auto x = torch::randn({2, 4, 8}, torch::requires_grad());
  auto weight = torch::randn({3, 8}, torch::requires_grad());
  auto bias = torch::randn({3}, torch::requires_grad());
  auto y = LinearRows(x, weight, bias);
  ASSERT_EQ(y.grad_fn()->next_edges().size(), 3u);
  for (const auto& edge : y.grad_fn()->next_edges()) {
    EXPECT_NE(edge.function->name().find("AccumulateGrad"), std::string::npos)
        << edge.function->name();
  }
  y.mul_(2.0);  // the q rows are scaled in place
  y.sum().backward();
  EXPECT_TRUE(torch::equal(bias.grad(), torch::full({3}, 16.0f)));
}

// The fused CPU attention against ATen's matmul/softmax formula: outputs and the gradient of qkv
// for one upstream gradient, without a mask and with the causal one.
TEST(SelfAttention, FusedCpuPathEqualsTheReferenceInValueAndGradient) {
  torch::manual_seed(2);
  const int64_t batch = 3, length = 7, heads = 4, width = 16;
  auto qkv = torch::randn({batch, length, 3 * width});
  auto upstream = torch::randn({batch, length, width});
  auto causal = torch::full({length, length}, -INFINITY).triu_(1);
  for (const auto& mask : {torch::Tensor(), causal}) {
    auto fused_in = qkv.clone().requires_grad_(true);
    auto reference_in = qkv.clone().requires_grad_(true);
    auto fused = MultiHeadSelfAttention(fused_in, heads, mask);
    auto reference = MultiHeadSelfAttentionReference(reference_in, heads, mask);
    EXPECT_NE(fused.grad_fn()->name().find("FusedSelfAttention"), std::string::npos)
        << "the CPU float32 path should be the fused one, ran " << fused.grad_fn()->name();
    EXPECT_TRUE(Close(fused, reference));
    (fused * upstream).sum().backward();
    (reference * upstream).sum().backward();
    EXPECT_TRUE(Close(fused_in.grad(), reference_in.grad()));
  }
  // Queries never see later positions under the causal mask.
  auto changed = qkv.clone();
  changed.narrow(1, length - 1, 1).normal_();
  EXPECT_TRUE(Close(MultiHeadSelfAttention(qkv, heads, causal).narrow(1, 0, length - 1),
                    MultiHeadSelfAttention(changed, heads, causal).narrow(1, 0, length - 1)));
}

// The path off the CPU float32 one (GPU, bfloat16): at::scaled_dot_product_attention, checked on
// the CPU against the matmul/softmax reference in value and gradient, with no mask, the causal
// mask read as a mask, and causality applied by the kernel (is_causal).
TEST(SelfAttention, SdpaPathEqualsTheReferenceInValueAndGradient) {
  torch::manual_seed(3);
  const int64_t batch = 3, length = 9, heads = 4, width = 32;
  auto qkv = torch::randn({batch, length, 3 * width});
  auto upstream = torch::randn({batch, length, width});
  auto causal_mask = torch::full({length, length}, -INFINITY).triu_(1);
  struct Case {
    torch::Tensor mask;
    bool causal;
  };
  for (const Case& c : {Case{torch::Tensor(), false}, Case{causal_mask, false},
                        Case{causal_mask, true}}) {
    auto sdpa_in = qkv.clone().requires_grad_(true);
    auto reference_in = qkv.clone().requires_grad_(true);
    auto sdpa = MultiHeadSelfAttentionSdpa(sdpa_in, heads, c.mask, c.causal);
    auto reference = MultiHeadSelfAttentionReference(reference_in, heads, c.mask);
    EXPECT_TRUE(Close(sdpa, reference)) << "causal " << c.causal;
    (sdpa * upstream).sum().backward();
    (reference * upstream).sum().backward();
    EXPECT_TRUE(Close(sdpa_in.grad(), reference_in.grad())) << "causal " << c.causal;
  }
  // bfloat16 is not the fused CPU path's: it goes through SDPA, close to float32's result.
  auto bf16 = MultiHeadSelfAttention(qkv.to(torch::kBFloat16), heads, causal_mask, true);
  EXPECT_EQ(bf16.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(Close(bf16.to(torch::kFloat), MultiHeadSelfAttentionReference(qkv, heads, causal_mask),
                    3e-2));
}

// The ATen operators run while `body` runs, on any thread (the backward's too).
std::vector<std::string> OperatorsRunBy(const std::function<void()>& body) {
  static std::mutex mutex;
  static std::vector<std::string>* names = nullptr;
  std::vector<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(mutex);
    names = &seen;
  }
  auto handle =
      at::addGlobalCallback(at::RecordFunctionCallback([](const at::RecordFunction& fn)
                                                           -> std::unique_ptr<at::ObserverContext> {
                              std::lock_guard<std::mutex> lock(mutex);
                              if (names != nullptr) names->emplace_back(fn.name());
                              return nullptr;
                            }).scopes({at::RecordScope::FUNCTION}));
  body();
  at::removeCallback(handle);
  std::lock_guard<std::mutex> lock(mutex);
  names = nullptr;
  return seen;
}

// The SDPA path's q, k and v: the gradient is exactly unbind's, and the backward writes it with
// one copy per part (index or unbind zero-fill, add or stack, then copy again).
TEST(SelfAttention, QueriesKeysValuesGradientIsWrittenOnceIntoQkvsLayout) {
  torch::manual_seed(4);
  const int64_t batch = 2, length = 5, heads = 4, width = 32;
  auto qkv = torch::randn({batch, length, 3 * width}, torch::kBFloat16);
  std::vector<torch::Tensor> upstream;
  for (int i = 0; i < 3; ++i)
    upstream.push_back(torch::randn({batch, heads, length, width / heads}));
  auto loss = [&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
    return (q.to(torch::kFloat) * upstream[0]).sum() + (k.to(torch::kFloat) * upstream[1]).sum() +
           (v.to(torch::kFloat) * upstream[2]).sum();
  };
  auto ours_in = qkv.clone().requires_grad_(true);
  auto [q, k, v] = QueriesKeysValues(ours_in, heads);
  auto unbind_in = qkv.clone().requires_grad_(true);
  auto parts =
      unbind_in.view({batch, length, 3, heads, width / heads}).permute({2, 0, 3, 1, 4}).unbind(0);
  EXPECT_TRUE(torch::equal(q, parts[0]) && torch::equal(k, parts[1]) && torch::equal(v, parts[2]));
  EXPECT_EQ(q.data_ptr(), ours_in.data_ptr()) << "q should be a view of qkv";
  auto ours_loss = loss(q, k, v);
  auto unbind_loss = loss(parts[0], parts[1], parts[2]);
  std::vector<std::string> ops = OperatorsRunBy([&] { ours_loss.backward(); });
  std::vector<std::string> unbind_ops = OperatorsRunBy([&] { unbind_loss.backward(); });
  EXPECT_TRUE(torch::equal(ours_in.grad(), unbind_in.grad()));
  EXPECT_TRUE(ours_in.grad().is_contiguous());
  // The operators from the split's backward node on, counted by name.
  auto split_ops = [](const std::vector<std::string>& all, const std::string& node) {
    std::map<std::string, int> count;
    bool in = false;
    for (const auto& name : all) {
      const bool is_node = name.rfind("autograd::engine::evaluate_function: ", 0) == 0;
      if (is_node)
        in = name.find(node) != std::string::npos ||
             (in && name.find("Backward") != std::string::npos);
      if (in && !is_node) ++count[name];
    }
    return count;
  };
  auto ours = split_ops(ops, "QkvHeads");
  EXPECT_EQ(ours["aten::copy_"], 3);
  for (const char* op : {"aten::zero_", "aten::fill_", "aten::add_", "aten::add", "aten::cat",
                         "aten::stack", "aten::clone"}) {
    EXPECT_EQ(ours[op], 0) << op << " ran in the split's backward";
  }
  // unbind's: a stacked copy, then a second copy back into qkv's layout.
  auto unbind = split_ops(unbind_ops, "UnbindBackward");
  EXPECT_EQ(unbind["aten::cat"], 1);
  EXPECT_EQ(unbind["aten::clone"], 1);
  // A part with no gradient is zero in qkv's.
  auto partial_in = qkv.clone().requires_grad_(true);
  auto partial = QueriesKeysValues(partial_in, heads);
  (partial[1].to(torch::kFloat) * upstream[1]).sum().backward();
  auto grad = partial_in.grad().view({batch, length, 3, width});
  EXPECT_EQ(grad.select(2, 0).abs().sum().item<float>(), 0.0f);
  EXPECT_EQ(grad.select(2, 2).abs().sum().item<float>(), 0.0f);
  EXPECT_TRUE(torch::equal(grad.select(2, 1),
                           unbind_in.grad().view({batch, length, 3, width}).select(2, 1)));
}

TEST(VisionTower, ShapesFollowThePreset) {
  ModelConfig config = PresetModelConfig("fmnist-tiny");
  VisionTower tower(config.vision, config.embed_dim);
  auto images = torch::randn({3, 1, 28, 28});
  EXPECT_EQ(tower->Embed(images).sizes(), (std::vector<int64_t>{3, 50, 128}));  // 49 + class
  EXPECT_EQ(tower(images).sizes(), (std::vector<int64_t>{3, 128}));
  EXPECT_EQ(tower->positional_embedding.sizes(), (std::vector<int64_t>{50, 128}));
  EXPECT_FALSE(tower->conv1->options.bias());
  EXPECT_THROW(tower(torch::randn({2, 3, 28, 28})), c10::Error);
}

TEST(VisionTower, EachImageIsEncodedIndependently) {
  ModelConfig config = PresetModelConfig("fmnist-tiny");
  VisionTower tower(config.vision, config.embed_dim);
  auto images = torch::randn({4, 1, 28, 28});
  auto together = tower(images);
  auto alone = tower(images.narrow(0, 2, 1));
  EXPECT_TRUE(Close(together.narrow(0, 2, 1), alone, 1e-4));
}

// The GPU's patch embedding (one matrix product) gives the convolution's values and weight
// gradient, here on the CPU.
TEST(VisionTower, PatchEmbeddingAsMatmulEqualsTheConvolution) {
  torch::manual_seed(6);
  auto images = torch::randn({3, 3, 64, 64});
  auto conv = torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 40, 16).stride(16).bias(false));
  auto expected = conv(images).flatten(2).transpose(1, 2);
  auto got = PatchEmbeddingAsMatmul(images, conv->weight);
  ASSERT_EQ(got.sizes(), expected.sizes());
  EXPECT_TRUE(Close(got, expected, 1e-4));
  auto expected_grad = torch::autograd::grad({expected.pow(2).sum()}, {conv->weight})[0];
  auto got_grad = torch::autograd::grad({got.pow(2).sum()}, {conv->weight})[0];
  EXPECT_TRUE(Close(got_grad, expected_grad, 1e-3));
  EXPECT_THROW(PatchEmbeddingAsMatmul(torch::randn({1, 3, 60, 64}), conv->weight), c10::Error);
}

// The text tower computed the long way: every position through every block with the causal
// mask, then the end token's row.
torch::Tensor TextFeaturesLongWay(TextTower& tower, const torch::Tensor& tokens) {
  const int64_t context = tokens.size(1);
  auto x = tower->token_embedding(tokens) + tower->positional_embedding;
  auto mask = torch::full({context, context}, -INFINITY).triu_(1);
  x = tower->ln_final(tower->transformer(x, mask));
  auto pooled = x.index({torch::arange(tokens.size(0), torch::kLong), tokens.argmax(-1)});
  return torch::matmul(pooled, tower->text_projection);
}

TEST(TextTower, PoolsAtTheEndTokenAndIgnoresWhatFollows) {
  torch::manual_seed(2);
  ModelConfig config = PresetModelConfig("fmnist-tiny");
  TextTower tower(config.text, config.embed_dim);
  auto tokens = torch::zeros({2, 32}, torch::kLong);
  tokens.index_put_({0, torch::indexing::Slice(0, 5)}, torch::tensor({257, 10, 20, 30, 258}));
  tokens.index_put_({1, torch::indexing::Slice(0, 9)},
                    torch::tensor({257, 1, 2, 3, 4, 5, 6, 7, 258}));
  auto features = tower(tokens);
  EXPECT_EQ(features.sizes(), (std::vector<int64_t>{2, 128}));
  EXPECT_TRUE(Close(features, TextFeaturesLongWay(tower, tokens), 1e-4));
  // Padding after the end token cannot change the features (causal mask).
  auto altered = tokens.clone();
  altered.index_put_({0, 20}, 99);
  EXPECT_TRUE(Close(tower(altered), features, 1e-5));
  // A token before the end token does.
  altered = tokens.clone();
  altered.index_put_({0, 2}, 99);
  EXPECT_FALSE(Close(tower(altered).narrow(0, 0, 1), features.narrow(0, 0, 1), 1e-5));
}

// The cut made by the caller on the host's rows (what the trainer does on a GPU, with no read
// back from the device) gives the features of the tower's own cut and of the whole context.
TEST(TextTower, CutByTheCallerEqualsTheTowersOwnCutAndTheWholeContext) {
  torch::manual_seed(3);
  ModelConfig config = PresetModelConfig("fmnist-tiny");
  TextTower tower(config.text, config.embed_dim);
  const int64_t context = config.text.context_length;
  std::vector<int64_t> rows(static_cast<size_t>(3 * context), 0);
  const std::vector<std::vector<int64_t>> captions = {
      {257, 10, 20, 258}, {257, 1, 2, 3, 4, 5, 6, 258}, {257, 9, 258}};
  for (size_t r = 0; r < captions.size(); ++r) {
    for (size_t i = 0; i < captions[r].size(); ++i) rows[r * context + i] = captions[r][i];
  }
  EXPECT_EQ(TextLengthToCut(rows, 3, context), 8);  // the longest caption's end token + 1
  auto tokens = torch::from_blob(rows.data(), {3, context}, torch::kLong).clone();
  auto own_cut = tower(tokens);
  tower->set_whole_context(true);
  auto whole = tower(tokens);
  tower->set_whole_context(false);
  tower->set_cut_by_caller(true);
  auto by_caller = tower(tokens.narrow(1, 0, 8).contiguous());
  EXPECT_TRUE(torch::equal(by_caller, own_cut));
  EXPECT_TRUE(Close(by_caller, whole, 1e-5));
  // The caller's full context is taken as it is; more than the context is refused.
  EXPECT_TRUE(Close(tower(tokens), whole, 1e-5));
  EXPECT_THROW(tower(torch::zeros({1, context + 1}, torch::kLong)), c10::Error);
  // A row whose end token sits in the last position keeps the whole context.
  std::vector<int64_t> full(static_cast<size_t>(context), 1);
  full.back() = 258;
  EXPECT_EQ(TextLengthToCut(full, 1, context), context);
  EXPECT_THROW(TextLengthToCut(full, 2, context), c10::Error);
}

TEST(ClipModel, FeaturesAreUnitRowsAndTheTemperatureStartsAtOneOverPointZeroSeven) {
  ClipModel model(PresetModelConfig("fmnist-tiny"));
  auto tokens = torch::zeros({3, 32}, torch::kLong);
  tokens.index_put_({torch::indexing::Slice(), 0}, 257);
  tokens.index_put_({torch::indexing::Slice(), 1}, torch::tensor({5, 6, 7}));
  tokens.index_put_({torch::indexing::Slice(), 2}, 258);
  ClipOutput out = model(torch::randn({3, 1, 28, 28}), tokens);
  EXPECT_TRUE(Close(out.image_features.norm(2, -1), torch::ones({3})));
  EXPECT_TRUE(Close(out.text_features.norm(2, -1), torch::ones({3})));
  EXPECT_NEAR(out.logit_scale.item<double>(), 1 / 0.07, 1e-4);
  {
    torch::NoGradGuard no_grad;
    model->logit_scale.fill_(7.0);
  }
  model->ClampLogitScale();
  EXPECT_NEAR(model->logit_scale.item<double>(), std::log(100.0), 1e-6);
  {
    torch::NoGradGuard no_grad;
    model->logit_scale.fill_(-1.0);
  }
  model->ClampLogitScale();
  EXPECT_EQ(model->logit_scale.item<double>(), 0.0);
}

TEST(ClipModel, ParameterNamesAndWeightDecayFollowOpenClip) {
  ClipModel model(PresetModelConfig("fmnist-tiny"));
  std::set<std::string> names;
  int64_t decayed = 0, total = 0;
  for (const auto& p : model->named_parameters()) {
    names.insert(p.key());
    total += p.value().numel();
    if (TakesWeightDecay(p.key(), p.value())) decayed += p.value().numel();
    if (p.key().find("ln_") != std::string::npos || p.key().find("bias") != std::string::npos ||
        p.key() == "logit_scale" || p.key() == "visual.class_embedding") {
      EXPECT_FALSE(TakesWeightDecay(p.key(), p.value())) << p.key();
    }
  }
  for (const char* name :
       {"visual.conv1.weight", "visual.class_embedding", "visual.positional_embedding",
        "visual.ln_pre.weight", "visual.transformer.resblocks.3.attn.in_proj_weight",
        "visual.transformer.resblocks.0.mlp.c_fc.weight", "visual.ln_post.bias", "visual.proj",
        "text.token_embedding.weight", "text.positional_embedding",
        "text.transformer.resblocks.1.attn.out_proj.weight", "text.ln_final.weight",
        "text.text_projection", "logit_scale"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  EXPECT_FALSE(names.count("visual.transformer.resblocks.4.ln_1.weight"));
  EXPECT_GT(decayed, 0);
  EXPECT_LT(decayed, total);
}

TEST(ClipModel, VitB32HasOpenClipsParameterCount) {
  // OpenCLIP's ViT-B-32: 151,277,313 parameters.
  ClipModel model(PresetModelConfig("vit-b-32"));
  EXPECT_EQ(ParameterCount(*model), 151277313);
}

TEST(ClipModel, ParameterHashSeesEveryParameter) {
  torch::manual_seed(3);
  ClipModel a(PresetModelConfig("fmnist-tiny"));
  torch::manual_seed(3);
  ClipModel b(PresetModelConfig("fmnist-tiny"));
  EXPECT_EQ(ParameterHash(*a), ParameterHash(*b));
  {
    torch::NoGradGuard no_grad;
    b->text->ln_final->bias[5] += 1e-3;
  }
  EXPECT_NE(ParameterHash(*a), ParameterHash(*b));
}

TEST(ContrastiveLoss, EqualsTheHandComputedValue) {
  auto image = torch::tensor({{1.0f, 0.0f}, {0.0f, 1.0f}});
  auto text = torch::tensor({{1.0f, 0.0f}, {0.6f, 0.8f}});
  auto scale = torch::tensor(2.0f);
  // logits_per_image = 2 * [[1, 0.6], [0, 0.8]]; logits_per_text is its transpose.
  auto ce = [](double target, double other) {
    return -target + std::log(std::exp(target) + std::exp(other));
  };
  const double per_image = (ce(2.0, 1.2) + ce(1.6, 0.0)) / 2;
  const double per_text = (ce(2.0, 0.0) + ce(1.6, 1.2)) / 2;
  EXPECT_NEAR(ContrastiveLoss(image, text, scale).item<double>(), (per_image + per_text) / 2, 1e-6);
}

TEST(ContrastiveLoss, IsSymmetricAndLowForMatchingPairs) {
  torch::manual_seed(4);
  auto a = torch::nn::functional::normalize(torch::randn({8, 16}),
                                            torch::nn::functional::NormalizeFuncOptions().dim(-1));
  auto b = torch::nn::functional::normalize(torch::randn({8, 16}),
                                            torch::nn::functional::NormalizeFuncOptions().dim(-1));
  auto scale = torch::tensor(10.0f);
  EXPECT_NEAR(ContrastiveLoss(a, b, scale).item<double>(),
              ContrastiveLoss(b, a, scale).item<double>(), 1e-6);
  EXPECT_LT(ContrastiveLoss(a, a, scale).item<double>(),
            ContrastiveLoss(a, b, scale).item<double>());
}

TEST(ContrastiveLoss, GatheredFeaturesGiveTheGlobalBatchLoss) {
  torch::manual_seed(5);
  auto img = torch::randn({6, 4}), txt = torch::randn({6, 4});
  auto scale = torch::tensor(3.0f);
  const double global = ContrastiveLoss(img, txt, scale).item<double>();
  // Rank 1 of 2 (rows 3..5), full matrix on every rank: the same global loss.
  GatheredFeatures full{img, txt, 3, false};
  EXPECT_NEAR(
      ContrastiveLoss(img.narrow(0, 3, 3), txt.narrow(0, 3, 3), scale, &full).item<double>(),
      global, 1e-5);
  // Local loss: the two ranks' losses average to the global one.
  GatheredFeatures r0{img, txt, 0, true}, r1{img, txt, 3, true};
  const double local0 =
      ContrastiveLoss(img.narrow(0, 0, 3), txt.narrow(0, 0, 3), scale, &r0).item<double>();
  const double local1 =
      ContrastiveLoss(img.narrow(0, 3, 3), txt.narrow(0, 3, 3), scale, &r1).item<double>();
  EXPECT_NEAR((local0 + local1) / 2, global, 1e-5);
}

TEST(CosineLrSchedule, WarmsUpLinearlyThenFollowsTheCosine) {
  CosineLrSchedule s{1.0, 4, 14};
  EXPECT_DOUBLE_EQ(s.At(0), 0.25);
  EXPECT_DOUBLE_EQ(s.At(3), 1.0);
  EXPECT_DOUBLE_EQ(s.At(4), 1.0);
  EXPECT_NEAR(s.At(9), 0.5, 1e-12);
  EXPECT_NEAR(s.At(14), 0.0, 1e-12);
}

std::string WriteFile(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ModelConfig, OpenClipViTB32JsonEqualsThePreset) {
  std::string path = WriteFile("ViT-B-32.json", R"({
    "embed_dim": 512,
    "vision_cfg": {"image_size": 224, "layers": 12, "width": 768, "patch_size": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 512, "heads": 8,
                 "layers": 12}
  })");
  ModelConfig json = LoadModelConfig(path), preset = PresetModelConfig("vit-b-32");
  EXPECT_EQ(json.embed_dim, preset.embed_dim);
  EXPECT_EQ(json.vision.heads, preset.vision.heads);  // width / head_width (64)
  EXPECT_EQ(json.vision.channels, 3);
  EXPECT_EQ(json.vision.patch_size, preset.vision.patch_size);
  EXPECT_EQ(json.text.layers, preset.text.layers);
  EXPECT_EQ(json.text.tokenizer, "bpe");
}

TEST(ModelConfig, ErrorsNameFileLineAndKey) {
  std::string bad = WriteFile("bad.json", "{\n  \"embed_dim\": 128,\n  \"vision_cfg\": {,\n}");
  try {
    LoadModelConfig(bad);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.json:3:"), std::string::npos) << e.what();
  }
  std::string timm = WriteFile("timm.json", R"({"embed_dim": 512,
    "vision_cfg": {"timm_model_name": "vit_base_patch32_224"}, "text_cfg": {}})");
  try {
    LoadModelConfig(timm);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("timm_model_name"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PresetModelConfig("rn50"), std::invalid_argument);
}

}  // namespace
}  // namespace dtrain::clip
