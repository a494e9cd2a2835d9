// TextTower: OpenCLIP's text transformer. Token + learned positions -> causal blocks ->
// ln_final -> the token at the end-of-text position -> projection to embed_dim.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "runtime/config/model_config.h"
#include "runtime/model/transformer.h"

namespace dtrain::clip {

class TextTowerImpl : public torch::nn::Module {
 public:
  TextTowerImpl(const TextConfig& config, int64_t embed_dim);
  // tokens [B, context] (int64, end token = the row's largest id) -> features [B, embed_dim].
  // Positions after the last end token in the batch cannot reach any end token through the
  // causal mask, so they are cut before the blocks: the result is the same, sooner. With
  // set_cut_by_caller(true) the caller has cut them already (TextLengthToCut on the host's rows):
  // tokens [B, L], L <= context, are taken as they are, with no read-back from the device.
  torch::Tensor forward(const torch::Tensor& tokens);
  void set_cut_by_caller(bool cut) { cut_by_caller_ = cut; }
  // true: always the whole context, no cut. The cut reads the batch's longest caption back to the
  // host (a device sync), which a CUDA graph cannot hold and which makes shapes vary per batch;
  // a captured step (--cuda-graphs) runs the whole context instead, as OpenCLIP does.
  void set_whole_context(bool whole) { whole_context_ = whole; }
  bool whole_context() const { return whole_context_; }

  torch::nn::Embedding token_embedding{nullptr};
  torch::Tensor positional_embedding, text_projection;
  Transformer transformer{nullptr};
  torch::nn::LayerNorm ln_final{nullptr};

 private:
  TextConfig config_;
  bool whole_context_ = false;
  bool cut_by_caller_ = false;
};
TORCH_MODULE(TextTower);

// The length the text tower cuts a batch to: one past the latest end token (each row's first
// largest id, as the tower's argmax finds it). `rows` holds `batch` rows of `context` ids.
int64_t TextLengthToCut(const std::vector<int64_t>& rows, int64_t batch, int64_t context);

// A cut length rounded up to a multiple of 8, at most `context`: the positions it adds come
// after every end token, so the features are the cut's (up to rounding). A captured step
// (--cuda-graphs) needs a graph per length: TextLengthBuckets(context) of them at most.
int64_t TextLengthBucket(int64_t length, int64_t context);
int64_t TextLengthBuckets(int64_t context);

}  // namespace dtrain::clip
