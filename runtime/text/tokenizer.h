// Tokenizer: captions -> fixed-length token rows [start, tokens..., end, 0...] as the text tower
// takes them. Torch-free; the end token always survives truncation (OpenCLIP's rule).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/model_config.h"

namespace dtrain::clip {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Token ids of `text` without start/end tokens.
  virtual std::vector<int64_t> Encode(const std::string& text) const = 0;
  // Text of `tokens`; start, end and padding tokens are dropped.
  virtual std::string Decode(const std::vector<int64_t>& tokens) const = 0;
  virtual int64_t start_token() const = 0;
  virtual int64_t end_token() const = 0;
  virtual int64_t vocab_size() const = 0;
  int context_length() const { return context_length_; }

  // texts.size() rows of context_length() ids, row-major: start, tokens, end, zero padding.
  std::vector<int64_t> Tokenize(const std::vector<std::string>& texts) const;

 protected:
  explicit Tokenizer(int context_length) : context_length_(context_length) {}

 private:
  int context_length_;
};

// Bytes as tokens: 0 pad, 1..256 the bytes 0..255, 257 start, 258 end.
class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(int context_length = 32) : Tokenizer(context_length) {}
  std::vector<int64_t> Encode(const std::string& text) const override;
  std::string Decode(const std::vector<int64_t>& tokens) const override;
  int64_t start_token() const override { return 257; }
  int64_t end_token() const override { return 258; }
  int64_t vocab_size() const override { return 259; }
};

// The tokenizer for `config` (BPE reads `bpe_vocab_path`); throws with the path on bad files.
std::unique_ptr<Tokenizer> MakeTokenizer(const TextConfig& config,
                                         const std::string& bpe_vocab_path);

}  // namespace dtrain::clip
