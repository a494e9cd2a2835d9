// Transformer: OpenCLIP's stack of pre-LN residual attention blocks (LN -> multi-head attention
// -> residual; LN -> Linear(4w) -> GELU -> Linear(w) -> residual), batch-first [B, L, W].
#pragma once

#include <torch/torch.h>

#include "runtime/model/linear_rows.h"

namespace dtrain::clip {

// nn.MultiheadAttention's parameters: packed [q; k; v] projection and the output projection.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(int64_t width);
  torch::Tensor in_proj_weight, in_proj_bias;
  torch::nn::Linear out_proj{nullptr};
};
TORCH_MODULE(Attention);

// Linear(w -> hidden) -> GELU -> Linear(hidden -> w).
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t width, int64_t hidden);
  torch::Tensor forward(const torch::Tensor& x) {
    return LinearRows(torch::gelu(LinearRows(x, c_fc->weight, c_fc->bias)), c_proj->weight,
                      c_proj->bias);
  }
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
};
TORCH_MODULE(Mlp);

// One block; parameter names follow OpenCLIP (attn.in_proj_weight, mlp.c_fc, ln_1, ...).
class ResidualAttentionBlockImpl : public torch::nn::Module {
 public:
  ResidualAttentionBlockImpl(int64_t width, int64_t heads, double mlp_ratio);
  // x [B, L, W]; `mask` is an additive [L, L] attention mask or undefined; `causal`: it is the
  // causal mask (the fused attention kernels then apply causality themselves).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, bool causal = false);
  // The block's output at one position per sample, rows[b] in [0, L): [B, W]. Equal to
  // forward(x, mask) gathered at `rows`, computing queries and the MLP for those rows only
  // (the pooled last layer needs nothing else). `causal`: row r sees positions <= r.
  torch::Tensor ForwardRows(const torch::Tensor& x, const torch::Tensor& rows, bool causal);

  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  Attention attn{nullptr};
  Mlp mlp{nullptr};

 private:
  int64_t width_, heads_;
};
TORCH_MODULE(ResidualAttentionBlock);

// `layers` blocks applied in order.
class TransformerImpl : public torch::nn::Module {
 public:
  TransformerImpl(int64_t width, int64_t layers, int64_t heads, double mlp_ratio);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& mask, bool causal = false);
  // forward() followed by taking position rows[b] of each sample, with the last block
  // computing only those rows.
  torch::Tensor ForwardPooled(const torch::Tensor& x, const torch::Tensor& mask,
                              const torch::Tensor& rows, bool causal);
  int64_t width() const { return width_; }
  int64_t layers() const { return static_cast<int64_t>(blocks_.size()); }
  ResidualAttentionBlock block(size_t i) const { return blocks_[i]; }

 private:
  int64_t width_;
  std::vector<ResidualAttentionBlock> blocks_;
  torch::nn::ModuleList resblocks_;
};
TORCH_MODULE(Transformer);

}  // namespace dtrain::clip
