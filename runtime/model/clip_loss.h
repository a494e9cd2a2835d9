// ContrastiveLoss: OpenCLIP's ClipLoss, symmetric cross-entropy over image-text similarities.
// Single process: pass this rank's features only. Distributed: also pass every rank's features
// (gathered with or without grad) and this rank's row offset in them.
#pragma once

#include <torch/torch.h>

namespace dtrain::clip {

// Features gathered from all ranks, rows of rank r at [r*B, (r+1)*B).
struct GatheredFeatures {
  torch::Tensor all_image_features;  // [world*B, E]
  torch::Tensor all_text_features;   // [world*B, E]
  int64_t offset = 0;                // this rank's first row (rank * B)
  // true: logits of this rank's rows against everyone (B x world*B), OpenCLIP's --local-loss;
  // false: the full world*B x world*B matrix on every rank.
  bool local_loss = false;
};

// image_features, text_features: [B, E] unit rows; logit_scale: exp'd scalar. Returns the mean of
// CE(image -> text) and CE(text -> image) with the matching pair as the target.
torch::Tensor ContrastiveLoss(const torch::Tensor& image_features,
                              const torch::Tensor& text_features, const torch::Tensor& logit_scale,
                              const GatheredFeatures* gathered = nullptr);

}  // namespace dtrain::clip
