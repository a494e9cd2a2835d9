#include "runtime/model/transformer.h"

#include <cmath>
#include <limits>

#include "runtime/model/self_attention.h"
#include "runtime/model/weight_copies.h"

namespace dtrain::clip {

AttentionImpl::AttentionImpl(int64_t width) {
  // nn.MultiheadAttention's initialisation: xavier-uniform packed projection, zero biases.
  in_proj_weight = register_parameter("in_proj_weight", torch::empty({3 * width, width}));
  in_proj_bias = register_parameter("in_proj_bias", torch::zeros({3 * width}));
  out_proj = register_module("out_proj", torch::nn::Linear(width, width));
  torch::NoGradGuard no_grad;
  torch::nn::init::xavier_uniform_(in_proj_weight);
  out_proj->bias.zero_();
}

MlpImpl::MlpImpl(int64_t width, int64_t hidden) {
  c_fc = register_module("c_fc", torch::nn::Linear(width, hidden));
  c_proj = register_module("c_proj", torch::nn::Linear(hidden, width));
}

ResidualAttentionBlockImpl::ResidualAttentionBlockImpl(int64_t width, int64_t heads,
                                                       double mlp_ratio)
    : width_(width), heads_(heads) {
  ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  attn = register_module("attn", Attention(width));
  ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  mlp = register_module("mlp", Mlp(width, static_cast<int64_t>(width * mlp_ratio)));
}

torch::Tensor ResidualAttentionBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& mask,
                                                  bool causal) {
  auto qkv = LinearRows(ln_1(x), attn->in_proj_weight, attn->in_proj_bias);  // [B, L, 3W]
  auto context = MultiHeadSelfAttention(qkv, heads_, mask, causal);          // [B, L, W]
  auto h = x + LinearRows(context, attn->out_proj->weight, attn->out_proj->bias);
  return h + mlp(ln_2(h));
}

torch::Tensor ResidualAttentionBlockImpl::ForwardRows(const torch::Tensor& x,
                                                      const torch::Tensor& rows, bool causal) {
  const int64_t batch = x.size(0), length = x.size(1), head_dim = width_ / heads_;
  auto normed = ln_1(x);
  auto arange = torch::arange(batch, rows.options());
  auto x_rows = x.index({arange, rows});            // [B, W]
  auto normed_rows = normed.index({arange, rows});  // [B, W]
  // One query per sample: its scores are dot products over D, not a batch of 1-row matmuls.
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const torch::Tensor& in_weight = UseWeightCopy(attn->in_proj_weight);
  const torch::Tensor& in_bias = UseWeightCopy(attn->in_proj_bias);
  auto q = LinearRows(normed_rows, in_weight.narrow(0, 0, width_), in_bias.narrow(0, 0, width_))
               .mul_(scale)
               .view({batch, 1, heads_, head_dim});
  auto kv = LinearRows(normed, in_weight.narrow(0, width_, 2 * width_),
                       in_bias.narrow(0, width_, 2 * width_))
                .view({batch, length, 2, heads_, head_dim});
  auto scores = (q * kv.select(2, 0)).sum(-1);  // [B, L, H]
  if (causal) {
    auto future = torch::arange(length, rows.options()).unsqueeze(0) > rows.unsqueeze(1);
    scores.masked_fill_(future.unsqueeze(-1), -std::numeric_limits<float>::infinity());
  }
  auto weights = torch::softmax(scores, 1).unsqueeze(-1);                      // [B, L, H, 1]
  auto context = (weights * kv.select(2, 1)).sum(1).reshape({batch, width_});  // [B, W]
  auto h = x_rows + LinearRows(context, attn->out_proj->weight, attn->out_proj->bias);
  return h + mlp(ln_2(h));
}

TransformerImpl::TransformerImpl(int64_t width, int64_t layers, int64_t heads, double mlp_ratio)
    : width_(width) {
  resblocks_ = register_module("resblocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < layers; ++i) {
    blocks_.push_back(ResidualAttentionBlock(width, heads, mlp_ratio));
    resblocks_->push_back(blocks_.back());
  }
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& x, const torch::Tensor& mask,
                                       bool causal) {
  torch::Tensor h = x;
  for (auto& block : blocks_) h = block->forward(h, mask, causal);
  return h;
}

torch::Tensor TransformerImpl::ForwardPooled(const torch::Tensor& x, const torch::Tensor& mask,
                                             const torch::Tensor& rows, bool causal) {
  torch::Tensor h = x;
  for (size_t i = 0; i + 1 < blocks_.size(); ++i) h = blocks_[i]->forward(h, mask, causal);
  if (blocks_.empty()) return h.index({torch::arange(h.size(0), rows.options()), rows});
  return blocks_.back()->ForwardRows(h, rows, causal);
}

}  // namespace dtrain::clip
