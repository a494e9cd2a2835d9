// Multi-head scaled dot-product self-attention over a packed [q | k | v] projection, as
// nn.MultiheadAttention computes it. On the CPU in float32 each (sample, head) block is a few
// BLAS calls that read q, k and v in place and write the output in place: no permuted copies,
// and the blocks spread over the intra-op threads (ATen's bmm on a BLAS without a batched gemm
// runs its blocks one after another, with several dispatcher calls each). Elsewhere (GPU,
// bfloat16, no BLAS) the same formula runs on ATen's matmul and softmax.
#pragma once

#include <torch/torch.h>

namespace dtrain::clip {

// qkv [B, L, 3W]: queries, keys and values side by side, each split into `heads` heads of
// D = W / heads columns; mask: additive [L, L] float mask or undefined. Returns [B, L, W], head h
// in columns [h*D, (h+1)*D): softmax(q_h k_h^T / sqrt(D) + mask) v_h. Differentiable in qkv.
torch::Tensor MultiHeadSelfAttention(const torch::Tensor& qkv, int64_t heads,
                                     const torch::Tensor& mask);

// The same with ATen's matmul and softmax on any device or dtype: the fallback, and the reference
// the fused CPU path is tested against.
torch::Tensor MultiHeadSelfAttentionReference(const torch::Tensor& qkv, int64_t heads,
                                              const torch::Tensor& mask);

}  // namespace dtrain::clip
