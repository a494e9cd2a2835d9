#include "runtime/dist/distributed_clip_loss.h"

#include "runtime/dist/all_gather_with_grad.h"
#include "runtime/model/clip_loss.h"

namespace dtrain::clip {

torch::Tensor ClipLossAcrossRanks(const torch::Tensor& image_features,
                                  const torch::Tensor& text_features,
                                  const torch::Tensor& logit_scale, Communicator* comm,
                                  const ClipLossOptions& options) {
  if (comm == nullptr || comm->size() == 1) {
    return ContrastiveLoss(image_features, text_features, logit_scale);
  }
  auto gather = [&](const torch::Tensor& local) {
    return options.gather_with_grad ? AllGatherWithGrad(local, *comm)
                                    : AllGatherNoGrad(local, *comm);
  };
  GatheredFeatures gathered;
  gathered.all_image_features = gather(image_features);
  gathered.all_text_features = gather(text_features);
  gathered.offset = static_cast<int64_t>(comm->rank()) * image_features.size(0);
  gathered.local_loss = options.local_loss;
  return ContrastiveLoss(image_features, text_features, logit_scale, &gathered);
}

}  // namespace dtrain::clip
