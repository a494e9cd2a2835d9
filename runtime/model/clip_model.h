// ClipModel: both towers and the learned temperature, as OpenCLIP's CLIP. Features come out
// L2-normalised; logit_scale starts at ln(1/0.07) and is kept in [0, ln 100] by ClampLogitScale.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "runtime/config/model_config.h"
#include "runtime/model/text_tower.h"
#include "runtime/model/vision_tower.h"

namespace dtrain::clip {

// What one forward pass produces.
struct ClipOutput {
  torch::Tensor image_features;  // [B, embed], unit rows
  torch::Tensor text_features;   // [B, embed], unit rows
  torch::Tensor logit_scale;     // scalar, exp(logit_scale): multiply cosine similarities by it
};

class ClipModelImpl : public torch::nn::Module {
 public:
  explicit ClipModelImpl(const ModelConfig& config);
  ClipOutput forward(const torch::Tensor& images, const torch::Tensor& tokens);
  torch::Tensor EncodeImage(const torch::Tensor& images);  // normalised
  torch::Tensor EncodeText(const torch::Tensor& tokens);   // normalised
  // Clamps logit_scale to [0, ln 100] in place (after each optimizer step).
  void ClampLogitScale();
  const ModelConfig& config() const { return config_; }

  VisionTower visual{nullptr};
  TextTower text{nullptr};
  torch::Tensor logit_scale;

 private:
  ModelConfig config_;
};
TORCH_MODULE(ClipModel);

// Parameters that get weight decay: matrices and embeddings; not gains, biases or logit_scale.
bool TakesWeightDecay(const std::string& name, const torch::Tensor& parameter);

// The model's parameters as AdamW's two groups, in registration order: {no decay, decay}.
std::vector<std::vector<torch::Tensor>> WeightDecayGroups(const torch::nn::Module& model);

// The parameters the forward pass multiplies by (projections, their biases, the patch embedding):
// what autocast would cast to bfloat16 at each use, and WeightCopies copies once a step instead.
// Not the LayerNorms, embeddings or logit_scale, which stay float32.
std::vector<torch::Tensor> MatrixWeights(const torch::nn::Module& model);

// FNV-1a over every parameter's float32 bytes, in registration order: equal on ranks with equal
// weights. 16 hex digits.
std::string ParameterHash(const torch::nn::Module& module);

int64_t ParameterCount(const torch::nn::Module& module);

}  // namespace dtrain::clip
