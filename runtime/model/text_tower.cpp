#include "runtime/model/text_tower.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/model/weight_copies.h"

namespace dtrain::clip {

TextTowerImpl::TextTowerImpl(const TextConfig& config, int64_t embed_dim) : config_(config) {
  const int64_t width = config.width;
  token_embedding =
      register_module("token_embedding", torch::nn::Embedding(config.vocab_size, width));
  positional_embedding =
      register_parameter("positional_embedding", torch::empty({config.context_length, width}));
  transformer = register_module("transformer",
                                Transformer(width, config.layers, config.heads, config.mlp_ratio));
  ln_final =
      register_module("ln_final", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  text_projection = register_parameter("text_projection", torch::empty({width, embed_dim}));

  // OpenCLIP's TextTransformer.init_parameters().
  torch::NoGradGuard no_grad;
  const double w = static_cast<double>(width);
  const double proj_std = std::pow(w, -0.5) * std::pow(2.0 * config.layers, -0.5);
  const double attn_std = std::pow(w, -0.5);
  const double fc_std = std::pow(2.0 * w, -0.5);
  torch::nn::init::normal_(token_embedding->weight, 0, 0.02);
  torch::nn::init::normal_(positional_embedding, 0, 0.01);
  for (int64_t i = 0; i < transformer->layers(); ++i) {
    auto block = transformer->block(i);
    torch::nn::init::normal_(block->attn->in_proj_weight, 0, attn_std);
    torch::nn::init::normal_(block->attn->out_proj->weight, 0, proj_std);
    torch::nn::init::normal_(block->mlp->c_fc->weight, 0, fc_std);
    torch::nn::init::normal_(block->mlp->c_proj->weight, 0, proj_std);
  }
  torch::nn::init::normal_(text_projection, 0, attn_std);
}

torch::Tensor TextTowerImpl::forward(const torch::Tensor& tokens) {
  const int64_t context = config_.context_length;
  const bool given = cut_by_caller_ && !whole_context_;
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(1) >= 1 &&
                  (given ? tokens.size(1) <= context : tokens.size(1) == context),
              "text tower expects tokens [B, ", given ? "<= " : "", context, "], got ",
              tokens.sizes());
  auto end_positions = tokens.argmax(-1);
  int64_t length = context;
  if (given) {
    length = tokens.size(1);
  } else if (!whole_context_) {
    length = end_positions.max().item<int64_t>() + 1;
  }
  auto x = token_embedding(tokens.narrow(1, 0, length)) + positional_embedding.narrow(0, 0, length);
  auto mask = torch::full({length, length}, -std::numeric_limits<float>::infinity(),
                          x.options().dtype(torch::kFloat))
                  .triu_(1);
  auto pooled = transformer->ForwardPooled(x, mask, end_positions, /*causal=*/true);
  return torch::matmul(ln_final(pooled), UseWeightCopy(text_projection));
}

int64_t TextLengthToCut(const std::vector<int64_t>& rows, int64_t batch, int64_t context) {
  TORCH_CHECK(static_cast<int64_t>(rows.size()) == batch * context,
              "TextLengthToCut: ", rows.size(), " ids for ", batch, " rows of ", context);
  int64_t length = 1;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t* row = rows.data() + b * context;
    int64_t end = 0;
    for (int64_t i = 1; i < context; ++i) {
      if (row[i] > row[end]) end = i;
    }
    length = std::max(length, end + 1);
  }
  return length;
}

namespace {
constexpr int64_t kTextLengthStep = 8;
}  // namespace

int64_t TextLengthBucket(int64_t length, int64_t context) {
  const int64_t rounded = (length + kTextLengthStep - 1) / kTextLengthStep * kTextLengthStep;
  return std::min(std::max<int64_t>(rounded, 1), context);
}

int64_t TextLengthBuckets(int64_t context) {
  return (context + kTextLengthStep - 1) / kTextLengthStep;
}

}  // namespace dtrain::clip
