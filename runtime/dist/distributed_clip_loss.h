// The CLIP contrastive loss across ranks, as OpenCLIP's ClipLoss: features of every rank are
// gathered so each sample is contrasted with the global batch. With gather_with_grad the gradients
// (averaged by the gradient synchroniser) equal those of one process on the concatenated batch.
#pragma once

#include <torch/torch.h>

#include "runtime/dist/communicator.h"

namespace dtrain::clip {

struct ClipLossOptions {
  bool gather_with_grad = false;  // --gather-with-grad: gather through AllGatherWithGrad
  bool local_loss = false;  // --local-loss: only this rank's rows, labels offset by rank*batch
};

// `image_features`, `text_features`: [batch, embed], L2-normalised; `logit_scale`: the scale
// already exponentiated (a scalar tensor). `comm` may be null (one process). Collective otherwise.
torch::Tensor ClipLossAcrossRanks(const torch::Tensor& image_features,
                                  const torch::Tensor& text_features,
                                  const torch::Tensor& logit_scale, Communicator* comm,
                                  const ClipLossOptions& options);

}  // namespace dtrain::clip
