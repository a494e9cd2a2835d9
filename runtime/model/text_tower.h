// TextTower: OpenCLIP's text transformer. Token + learned positions -> causal blocks ->
// ln_final -> the token at the end-of-text position -> projection to embed_dim.
#pragma once

#include <torch/torch.h>

#include "runtime/config/model_config.h"
#include "runtime/model/transformer.h"

namespace dtrain::clip {

class TextTowerImpl : public torch::nn::Module {
 public:
  TextTowerImpl(const TextConfig& config, int64_t embed_dim);
  // tokens [B, context] (int64, end token = the row's largest id) -> features [B, embed_dim].
  // Positions after the last end token in the batch cannot reach any end token through the
  // causal mask, so they are cut before the blocks: the result is the same, sooner.
  torch::Tensor forward(const torch::Tensor& tokens);
  // true: always the whole context, no cut. The cut reads the batch's longest caption back to the
  // host (a device sync), which a CUDA graph cannot hold and which makes shapes vary per batch;
  // a captured step (--cuda-graphs) runs the whole context instead, as OpenCLIP does.
  void set_whole_context(bool whole) { whole_context_ = whole; }

  torch::nn::Embedding token_embedding{nullptr};
  torch::Tensor positional_embedding, text_projection;
  Transformer transformer{nullptr};
  torch::nn::LayerNorm ln_final{nullptr};

 private:
  TextConfig config_;
  bool whole_context_ = false;
};
TORCH_MODULE(TextTower);

}  // namespace dtrain::clip
