#include "runtime/text/tokenizer.h"

#include <stdexcept>

#include "runtime/text/bpe_tokenizer.h"

namespace dtrain::clip {

std::vector<int64_t> Tokenizer::Tokenize(const std::vector<std::string>& texts) const {
  const size_t context = static_cast<size_t>(context_length_);
  std::vector<int64_t> rows(texts.size() * context, 0);
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int64_t> tokens = Encode(texts[i]);
    int64_t* row = rows.data() + i * context;
    row[0] = start_token();
    size_t n = std::min(tokens.size(), context - 2);
    std::copy(tokens.begin(), tokens.begin() + n, row + 1);
    row[n + 1] = end_token();
  }
  return rows;
}

std::vector<int64_t> ByteTokenizer::Encode(const std::string& text) const {
  std::vector<int64_t> tokens;
  tokens.reserve(text.size());
  for (unsigned char c : text) tokens.push_back(static_cast<int64_t>(c) + 1);
  return tokens;
}

std::string ByteTokenizer::Decode(const std::vector<int64_t>& tokens) const {
  std::string text;
  for (int64_t t : tokens) {
    if (t >= 1 && t <= 256) text += static_cast<char>(t - 1);
  }
  return text;
}

std::unique_ptr<Tokenizer> MakeTokenizer(const TextConfig& config,
                                         const std::string& bpe_vocab_path) {
  std::unique_ptr<Tokenizer> tokenizer;
  if (config.tokenizer == "byte") {
    tokenizer = std::make_unique<ByteTokenizer>(config.context_length);
  } else {
    if (bpe_vocab_path.empty()) {
      throw std::runtime_error(
          "this model uses the CLIP BPE tokenizer: pass --bpe-vocab "
          "bpe_simple_vocab_16e6.txt.gz (OpenCLIP ships it in open_clip/)");
    }
    tokenizer = std::make_unique<BpeTokenizer>(bpe_vocab_path, config.context_length);
  }
  if (tokenizer->vocab_size() > config.vocab_size) {
    throw std::runtime_error("tokenizer has " + std::to_string(tokenizer->vocab_size()) +
                             " tokens but the text tower's vocab_size is " +
                             std::to_string(config.vocab_size));
  }
  return tokenizer;
}

}  // namespace dtrain::clip
