// Fused bias gradient (`--fused-bias-grad on`): a linear layer's bias gradient taken from the
// matrix product that makes its weight gradient, by cuBLASLt's BGRADB epilogue, instead of a sum
// over the rows of the output's gradient afterwards, which reads the whole gradient again. On an
// H200 at batch 256 a ViT-B/32 step made 102 such bfloat16 sums (98 of them LinearRows'), 2.0 ms
// of its 31.5 ms of kernels (bench/results/h200-2026-12-04/clip_kernels.txt).
//
// cuBLASLt is the one LibTorch loaded (its functions looked up in the process, not linked): no
// second copy of the library. Where the fused product does not apply (not CUDA, a type other than
// bfloat16 or float16, rows not contiguous or not a multiple of 8 wide, or cuBLASLt offering no
// algorithm for it), WeightAndBiasGradients declines and LinearRows computes both as before.
// `dtrain-clip check` (fused-bias-grad) compares the two on the device.
#pragma once

#include <torch/torch.h>

#include <string>

namespace dtrain::clip {

// Process-wide: LinearRows' backward runs on autograd's device threads.
void SetFusedBiasGrad(bool on);
bool FusedBiasGradEnabled();

// grad [M, out] and rows [M, in], one CUDA device, one type: *weight_grad = grad^T rows
// ([out, in]) and *bias_grad = the sum of grad's rows ([out]), in one cuBLASLt matmul. Returns
// false and leaves both untouched where it does not apply; *why (if given) then says why.
bool WeightAndBiasGradients(const torch::Tensor& grad, const torch::Tensor& rows,
                            torch::Tensor* weight_grad, torch::Tensor* bias_grad,
                            std::string* why = nullptr);

}  // namespace dtrain::clip
