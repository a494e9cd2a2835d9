// LinearRows: torch::linear over the rows of x [..., in], as one autograd node. Forward is one
// addmm on a 2-D view, so the bias lands in the gemm's accumulator instead of a second pass over
// the output; backward computes the input's, the weight's and the bias's gradients with the same
// matrix products and sum that addmm's own backward would, bit for bit. Recorded as addmm, its
// views and its transpose, a linear layer costs autograd four nodes and a sum, each a dispatch on
// the host (~800 of a ViT-B/32 step's ~1,800 top-level operators); this way one.
//
// Under autocast the inputs are cast as autocast casts addmm's (weights through UseWeightCopy
// first: already bfloat16 where WeightCopies is in scope).
#pragma once

#include <torch/torch.h>

namespace dtrain::clip {

torch::Tensor LinearRows(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias);

}  // namespace dtrain::clip
