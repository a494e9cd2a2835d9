// A two-tower model small enough for multi-process tests: the loss and synchronisation code do
// not care what the towers are, only that every parameter gets gradients through both features.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace dtrain::clip::testing {

struct TinyClipImpl : torch::nn::Module {
  TinyClipImpl() {
    torch::manual_seed(7);
    image_in = register_module("image_in", torch::nn::Linear(16, 32));
    image_out = register_module("image_out", torch::nn::Linear(32, 8));
    text_in = register_module("text_in", torch::nn::Linear(12, 32));
    text_out = register_module("text_out", torch::nn::Linear(32, 8));
    logit_scale = register_parameter("logit_scale", torch::full({}, 2.6592));
  }
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& images,
                                                  const torch::Tensor& texts) {
    auto image = image_out(torch::gelu(image_in(images)));
    auto text = text_out(torch::gelu(text_in(texts)));
    return {image / image.norm(2, -1, true), text / text.norm(2, -1, true)};
  }
  torch::nn::Linear image_in{nullptr}, image_out{nullptr}, text_in{nullptr}, text_out{nullptr};
  torch::Tensor logit_scale;
};
TORCH_MODULE(TinyClip);

// The global batch, the same on every rank; rank r trains on rows [r*b, (r+1)*b).
inline std::pair<torch::Tensor, torch::Tensor> GlobalBatch(int64_t rows) {
  torch::manual_seed(11);
  return {torch::randn({rows, 16}), torch::randn({rows, 12})};
}

inline std::vector<std::pair<std::string, torch::Tensor>> NamedParameters(TinyClip& model) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  return named;
}

}  // namespace dtrain::clip::testing
