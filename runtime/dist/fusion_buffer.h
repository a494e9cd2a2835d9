// The fusion-buffer operations of gradient averaging, as Horovod's MEMCPY_IN_FUSION_BUFFER and
// MEMCPY_OUT_FUSION_BUFFER: gradients that are not end to end in one buffer are packed into a
// reusable flat buffer, reduced there and copied back (averaged on the way out); gradients that
// are end to end are reduced through one view of them, with no copy.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace dtrain::clip {

// True when `grads` (at least one) are contiguous and lie end to end, in this order, in one
// storage: then FlatView reduces them in place.
bool LieEndToEnd(const std::vector<torch::Tensor>& grads);
// One 1-D view over `numel` elements starting at `first`'s first element.
torch::Tensor FlatView(const torch::Tensor& first, int64_t numel);

// Copies `grads` one after another into `buffer` (reallocated when too small or of another
// dtype or device, to at least `capacity_bytes`) and returns the filled part.
torch::Tensor PackIntoFusionBuffer(torch::Tensor& buffer, const std::vector<torch::Tensor>& grads,
                                   int64_t capacity_bytes);
// Copies `flat` back into `grads` (the order PackIntoFusionBuffer used), divided by `divisor`
// when it is defined (a CPU scalar tensor), in one pass.
void UnpackFromFusionBuffer(const torch::Tensor& flat, std::vector<torch::Tensor>& grads,
                            const torch::Tensor& divisor);

}  // namespace dtrain::clip
