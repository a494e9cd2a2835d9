// VisionTower: OpenCLIP's VisionTransformer. Conv patch embedding (no bias) + class token +
// learned positions -> ln_pre -> blocks -> ln_post(class token) -> projection to embed_dim.
#pragma once

#include <torch/torch.h>

#include "runtime/config/model_config.h"
#include "runtime/model/transformer.h"

namespace dtrain::clip {

class VisionTowerImpl : public torch::nn::Module {
 public:
  VisionTowerImpl(const VisionConfig& config, int64_t embed_dim);
  // images [B, C, H, W] (normalised) -> unnormalised features [B, embed_dim].
  torch::Tensor forward(const torch::Tensor& images);
  // The tokens before the transformer: [B, 1 + patches, width].
  torch::Tensor Embed(const torch::Tensor& images);

  torch::nn::Conv2d conv1{nullptr};
  torch::Tensor class_embedding, positional_embedding, proj;
  torch::nn::LayerNorm ln_pre{nullptr}, ln_post{nullptr};
  Transformer transformer{nullptr};

 private:
  VisionConfig config_;
};
TORCH_MODULE(VisionTower);

}  // namespace dtrain::clip
