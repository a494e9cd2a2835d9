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

// The patch embedding as one matrix product: images [B, C, g*p, g*p] cut into g*g patches of
// C*p*p values, times `weight` [width, C, p, p] transposed -> [B, g*g, width]. The same numbers
// as conv1 with stride p (up to summation order). On CUDA it replaces cuDNN's convolution, whose
// weight gradient took 3.0 ms of a 45 ms ViT-B/32 step at batch 256 on an H200 (a 59 GFLOP
// product, a fraction of a millisecond as a GEMM).
torch::Tensor PatchEmbeddingAsMatmul(const torch::Tensor& images, const torch::Tensor& weight);

}  // namespace dtrain::clip
