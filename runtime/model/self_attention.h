// Multi-head scaled dot-product self-attention over a packed [q | k | v] projection, as
// nn.MultiheadAttention computes it. On the CPU in float32 each (sample, head) block is a few
// BLAS calls that read q, k and v in place and write the output in place: no permuted copies,
// and the blocks spread over the intra-op threads (ATen's bmm on a BLAS without a batched gemm
// runs its blocks one after another, with several dispatcher calls each). Elsewhere (GPU,
// bfloat16, no BLAS) it runs on ATen's scaled_dot_product_attention, which picks the fused
// kernels LibTorch 2.x has for the device (flash / memory-efficient attention on CUDA).
#pragma once

#include <torch/torch.h>

#include <array>

namespace dtrain::clip {

// qkv [B, L, 3W]: queries, keys and values side by side, each split into `heads` heads of
// D = W / heads columns; mask: additive [L, L] float mask or undefined. Returns [B, L, W], head h
// in columns [h*D, (h+1)*D): softmax(q_h k_h^T / sqrt(D) + mask) v_h. Differentiable in qkv.
// `causal`: `mask` is the causal mask (-inf above the diagonal), so the fused kernels can apply
// causality themselves instead of reading the mask.
torch::Tensor MultiHeadSelfAttention(const torch::Tensor& qkv, int64_t heads,
                                     const torch::Tensor& mask, bool causal = false);

// The same through at::scaled_dot_product_attention: the path off the CPU float32 one.
torch::Tensor MultiHeadSelfAttentionSdpa(const torch::Tensor& qkv, int64_t heads,
                                         const torch::Tensor& mask, bool causal);

// qkv [B, L, 3W] as queries, keys and values, each a [B, H, L, D] view of it. Differentiable in
// qkv: the backward writes the three gradients into one tensor of qkv's layout, one copy each.
std::array<torch::Tensor, 3> QueriesKeysValues(const torch::Tensor& qkv, int64_t heads);

// The same with ATen's matmul and softmax on any device or dtype: the reference the fused CPU
// path and the SDPA path are tested against.
torch::Tensor MultiHeadSelfAttentionReference(const torch::Tensor& qkv, int64_t heads,
                                              const torch::Tensor& mask);

}  // namespace dtrain::clip
