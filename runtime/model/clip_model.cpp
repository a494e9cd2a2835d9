#include "runtime/model/clip_model.h"

#include <cmath>
#include <cstdio>

namespace dtrain::clip {

ClipModelImpl::ClipModelImpl(const ModelConfig& config) : config_(config) {
  ValidateModelConfig(config);
  visual = register_module("visual", VisionTower(config.vision, config.embed_dim));
  text = register_module("text", TextTower(config.text, config.embed_dim));
  logit_scale = register_parameter("logit_scale", torch::full({}, std::log(1.0 / 0.07)));
}

torch::Tensor ClipModelImpl::EncodeImage(const torch::Tensor& images) {
  return torch::nn::functional::normalize(visual(images),
                                          torch::nn::functional::NormalizeFuncOptions().dim(-1));
}

torch::Tensor ClipModelImpl::EncodeText(const torch::Tensor& tokens) {
  return torch::nn::functional::normalize(text(tokens),
                                          torch::nn::functional::NormalizeFuncOptions().dim(-1));
}

ClipOutput ClipModelImpl::forward(const torch::Tensor& images, const torch::Tensor& tokens) {
  return ClipOutput{EncodeImage(images), EncodeText(tokens), logit_scale.exp()};
}

void ClipModelImpl::ClampLogitScale() {
  torch::NoGradGuard no_grad;
  logit_scale.clamp_(0.0, std::log(100.0));
}

bool TakesWeightDecay(const std::string& name, const torch::Tensor& parameter) {
  return parameter.dim() >= 2 && name.find("logit_scale") == std::string::npos;
}

std::vector<std::vector<torch::Tensor>> WeightDecayGroups(const torch::nn::Module& model) {
  std::vector<std::vector<torch::Tensor>> groups(2);
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    groups[TakesWeightDecay(item.key(), item.value()) ? 1 : 0].push_back(item.value());
  }
  return groups;
}

std::vector<torch::Tensor> MatrixWeights(const torch::nn::Module& model) {
  std::vector<torch::Tensor> weights;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    if (name.find("ln_") != std::string::npos || name.find("embedding") != std::string::npos ||
        name == "logit_scale") {
      continue;
    }
    weights.push_back(item.value());
  }
  return weights;
}

std::string ParameterHash(const torch::nn::Module& module) {
  uint64_t hash = 1469598103934665603ULL;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    auto values = item.value().detach().to(torch::kCPU, torch::kFloat).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(values.data_ptr());
    const size_t n = values.numel() * sizeof(float);
    for (size_t i = 0; i < n; ++i) {
      hash ^= bytes[i];
      hash *= 1099511628211ULL;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

int64_t ParameterCount(const torch::nn::Module& module) {
  int64_t count = 0;
  for (const auto& p : module.parameters()) count += p.numel();
  return count;
}

}  // namespace dtrain::clip
