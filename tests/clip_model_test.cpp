// The CLIP model's towers, loss, schedule and config reader: shapes, invariants, and values
// computed by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "runtime/config/model_config.h"
#include "runtime/model/clip_loss.h"
#include "runtime/model/clip_model.h"
#include "runtime/train/lr_schedule.h"

namespace dtrain::clip {
namespace {

bool Close(const torch::Tensor& a, const torch::Tensor& b, double tol = 1e-5) {
  return torch::allclose(a, b, tol, tol);
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

// Sizes must be whole, positive and of a sane size, [h, w] image sizes too: a fraction or a
// negative number was taken for an int (image_size [224.5, 224.5] built 224), and one beyond int's
// range was converted anyway (undefined behaviour; found by bench/fuzz.sh).
TEST(ModelConfig, SizesAreWholePositiveAndBounded) {
  const std::string good = R"({"embed_dim": 64, "vision_cfg": {"image_size": [32, 32],
    "patch_size": 8, "width": 64, "layers": 1, "head_width": 32},
    "text_cfg": {"vocab_size": 259, "width": 64, "heads": 2, "layers": 1}})";
  EXPECT_EQ(LoadModelConfig(WriteFile("good.json", good)).vision.image_size, 32);
  for (const char* bad : {"[224.5, 224.5]", "[-32, -32]", "224.5", "0", "-8",
                          "7333333333333333333333333333.8", "1e300", "4194305"}) {
    std::string text = good;
    text.replace(text.find("[32, 32]"), 8, bad);
    try {
      LoadModelConfig(WriteFile("bad.json", text));
      ADD_FAILURE() << bad << " was taken";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("\"image_size\" must be a positive integer"),
                std::string::npos)
          << bad << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace dtrain::clip
