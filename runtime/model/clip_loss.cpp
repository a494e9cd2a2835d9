#include "runtime/model/clip_loss.h"

namespace dtrain::clip {

torch::Tensor ContrastiveLoss(const torch::Tensor& image_features,
                              const torch::Tensor& text_features, const torch::Tensor& logit_scale,
                              const GatheredFeatures* gathered) {
  const int64_t batch = image_features.size(0);
  auto long_options = torch::TensorOptions().dtype(torch::kLong).device(image_features.device());
  torch::Tensor logits_per_image, logits_per_text, labels;
  if (gathered == nullptr) {
    logits_per_image = logit_scale * torch::matmul(image_features, text_features.t());
    logits_per_text = logits_per_image.t();
    labels = torch::arange(batch, long_options);
  } else if (gathered->local_loss) {
    logits_per_image = logit_scale * torch::matmul(image_features, gathered->all_text_features.t());
    logits_per_text = logit_scale * torch::matmul(text_features, gathered->all_image_features.t());
    labels = torch::arange(gathered->offset, gathered->offset + batch, long_options);
  } else {
    logits_per_image =
        logit_scale * torch::matmul(gathered->all_image_features, gathered->all_text_features.t());
    logits_per_text = logits_per_image.t();
    labels = torch::arange(gathered->all_image_features.size(0), long_options);
  }
  namespace F = torch::nn::functional;
  return (F::cross_entropy(logits_per_image.to(torch::kFloat), labels) +
          F::cross_entropy(logits_per_text.to(torch::kFloat), labels)) /
         2;
}

}  // namespace dtrain::clip
