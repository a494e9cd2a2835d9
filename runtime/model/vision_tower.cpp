#include "runtime/model/vision_tower.h"

#include <cmath>

#include "runtime/model/weight_copies.h"

namespace dtrain::clip {

VisionTowerImpl::VisionTowerImpl(const VisionConfig& config, int64_t embed_dim) : config_(config) {
  const int64_t width = config.width;
  const int64_t grid = config.image_size / config.patch_size;
  const double scale = std::pow(static_cast<double>(width), -0.5);
  conv1 = register_module(
      "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(config.channels, width, config.patch_size)
                                     .stride(config.patch_size)
                                     .bias(false)));
  class_embedding = register_parameter("class_embedding", torch::randn({width}) * scale);
  positional_embedding =
      register_parameter("positional_embedding", torch::randn({grid * grid + 1, width}) * scale);
  ln_pre = register_module("ln_pre", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  transformer = register_module("transformer",
                                Transformer(width, config.layers, config.heads, config.mlp_ratio));
  ln_post = register_module("ln_post", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  proj = register_parameter("proj", torch::randn({width, embed_dim}) * scale);
}

torch::Tensor VisionTowerImpl::Embed(const torch::Tensor& images) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == config_.channels &&
                  images.size(2) == config_.image_size && images.size(3) == config_.image_size,
              "vision tower expects images [B, ", config_.channels, ", ", config_.image_size, ", ",
              config_.image_size, "], got ", images.sizes());
  // [B, grid^2, W]. On the CPU the convolution, as it always was (bit for bit the same runs).
  auto patches = images.is_cuda() && config_.image_size % config_.patch_size == 0
                     ? PatchEmbeddingAsMatmul(images, UseWeightCopy(conv1->weight))
                     : torch::nn::functional::conv2d(
                           images, UseWeightCopy(conv1->weight),
                           torch::nn::functional::Conv2dFuncOptions().stride(config_.patch_size))
                           .flatten(2)
                           .transpose(1, 2);
  auto cls = class_embedding.to(patches.dtype()).expand({patches.size(0), 1, -1});
  return torch::cat({cls, patches}, 1) + positional_embedding.to(patches.dtype());
}

torch::Tensor VisionTowerImpl::forward(const torch::Tensor& images) {
  auto x = ln_pre(Embed(images));
  auto rows =
      torch::zeros({x.size(0)}, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
  auto pooled = transformer->ForwardPooled(x, torch::Tensor(), rows, /*causal=*/false);
  return torch::matmul(ln_post(pooled), UseWeightCopy(proj));
}

torch::Tensor PatchEmbeddingAsMatmul(const torch::Tensor& images, const torch::Tensor& weight) {
  const int64_t batch = images.size(0), channels = images.size(1), patch = weight.size(2);
  const int64_t grid_h = images.size(2) / patch, grid_w = images.size(3) / patch;
  TORCH_CHECK(images.size(2) == grid_h * patch && images.size(3) == grid_w * patch &&
                  weight.size(1) == channels && weight.size(3) == patch,
              "patch embedding: images ", images.sizes(), " do not tile into patches of ",
              weight.sizes());
  const int64_t width = weight.size(0), values = channels * patch * patch;
  // [B, C, gh, p, gw, p] -> [B, gh, gw, C, p, p]: each patch's values in the weight's order.
  auto rows = images.reshape({batch, channels, grid_h, patch, grid_w, patch})
                  .permute({0, 2, 4, 1, 3, 5})
                  .reshape({batch * grid_h * grid_w, values});
  return torch::matmul(rows, weight.reshape({width, values}).t())
      .view({batch, grid_h * grid_w, width});
}

}  // namespace dtrain::clip
