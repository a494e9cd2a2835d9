// BpeTokenizer: OpenCLIP's SimpleTokenizer (CLIP BPE) in C++: lower-cased, whitespace-collapsed
// text, OpenCLIP's pre-tokenisation pattern, byte-level BPE from a bpe_simple_vocab_16e6.txt.gz.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/text/tokenizer.h"

namespace dtrain::clip {

class BpeTokenizer : public Tokenizer {
 public:
  // Reads a merges file (gzip or plain text; first line is a header, as in OpenCLIP's file) and
  // uses at most 49152 - 256 - 2 merges, so the full file gives vocab 49408 (start 49406, end
  // 49407). Throws std::runtime_error naming the file and line on a malformed file.
  BpeTokenizer(const std::string& merges_path, int context_length = 77);

  std::vector<int64_t> Encode(const std::string& text) const override;
  std::string Decode(const std::vector<int64_t>& tokens) const override;
  int64_t start_token() const override { return start_; }
  int64_t end_token() const override { return end_; }
  int64_t vocab_size() const override { return static_cast<int64_t>(decoder_.size()); }

  // OpenCLIP's pre-tokenisation of cleaned, lower-cased text (exposed for tests).
  static std::vector<std::string> PreTokenize(const std::string& text);
  // Decode HTML character references (twice, as OpenCLIP), lower-case ASCII and
  // Latin-1/Greek/Cyrillic letters, collapse whitespace, trim.
  static std::string CleanText(const std::string& text);

 private:
  std::vector<std::string> Bpe(const std::string& token) const;

  std::string byte_encoder_[256];                      // byte -> its printable stand-in (UTF-8)
  std::unordered_map<std::string, int> byte_decoder_;  // stand-in -> byte
  std::map<std::pair<std::string, std::string>, int> merge_ranks_;
  std::unordered_map<std::string, int64_t> encoder_;
  std::vector<std::string> decoder_;
  int64_t start_ = 0, end_ = 0;
};

}  // namespace dtrain::clip
