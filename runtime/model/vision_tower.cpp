#include "runtime/model/vision_tower.h"

#include <cmath>

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
  auto patches = conv1(images).flatten(2).transpose(1, 2);  // [B, grid^2, W]
  auto cls = class_embedding.to(patches.dtype()).expand({patches.size(0), 1, -1});
  return torch::cat({cls, patches}, 1) + positional_embedding.to(patches.dtype());
}

torch::Tensor VisionTowerImpl::forward(const torch::Tensor& images) {
  auto x = ln_pre(Embed(images));
  auto rows =
      torch::zeros({x.size(0)}, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
  auto pooled = transformer->ForwardPooled(x, torch::Tensor(), rows, /*causal=*/false);
  return torch::matmul(ln_post(pooled), proj);
}

}  // namespace dtrain::clip
