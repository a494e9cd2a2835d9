#include "runtime/text/bpe_tokenizer.h"
#include "runtime/formats/json_text.h"
#include "runtime/text/html_entities.h"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <sstream>
#include <stdexcept>

namespace dtrain::clip {
namespace {

constexpr int kMaxMerges = 49152 - 256 - 2;
const char* const kSpecialTokens[] = {"<start_of_text>", "<end_of_text>"};

// Decodes UTF-8 into code points; a malformed byte becomes U+FFFD.
std::vector<uint32_t> DecodeUtf8(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + extra >= s.size() + (extra == 0)) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    uint32_t code = extra == 0 ? c : c & (0x3F >> extra);
    bool ok = true;
    for (int k = 1; k <= extra; ++k) {
      unsigned char cc = s[i + k];
      if ((cc >> 6) != 2) ok = false;
      code = (code << 6) | (cc & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(code);
    i += extra + 1;
  }
  return out;
}

bool IsSpace(uint32_t c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// \p{N} for the digits and number signs captions meet; other scripts' digits are rare.
bool IsNumber(uint32_t c) {
  return (c >= '0' && c <= '9') || c == 0xB2 || c == 0xB3 || c == 0xB9 ||
         (c >= 0xBC && c <= 0xBE) || (c >= 0x660 && c <= 0x669) || (c >= 0x6F0 && c <= 0x6F9) ||
         (c >= 0x966 && c <= 0x96F) || (c >= 0xFF10 && c <= 0xFF19) ||
         (c >= 0x2150 && c <= 0x218B) || (c >= 0x2460 && c <= 0x249B);
}

// \p{L} without Unicode tables: ASCII letters, and any non-ASCII code point outside the
// punctuation, symbol, mark and emoji blocks (std::regex has no \p{L}).
bool IsLetter(uint32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (IsNumber(c) || IsSpace(c)) return false;
  if (c < 0xC0) return c == 0xAA || c == 0xB5 || c == 0xBA;
  if (c == 0xD7 || c == 0xF7) return false;
  if (c >= 0x2B0 && c <= 0x36F) return c < 0x2C2;  // modifier letters yes, combining marks no
  if (c >= 0x2000 && c <= 0x2BFF) return false;    // punctuation, symbols, arrows, math
  if (c >= 0x3000 && c <= 0x303F) return false;    // CJK punctuation
  if (c >= 0xFE30 && c <= 0xFE4F) return false;
  if ((c >= 0xFF00 && c <= 0xFF20) || (c >= 0xFF3B && c <= 0xFF40) ||
      (c >= 0xFF5B && c <= 0xFF65)) {
    return false;
  }
  if (c >= 0x1F000 && c <= 0x1FAFF) return false;  // emoji and pictographs
  if (c == 0xFFFD) return false;
  return true;
}

uint32_t ToLower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) ||
      (c >= 0x410 && c <= 0x42F)) {
    return c + 32;
  }
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

std::string ReadMaybeGzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (!file) throw std::runtime_error(path + ": cannot open BPE vocabulary");
  std::string text;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(file, buffer, sizeof buffer)) > 0) text.append(buffer, n);
  int err = 0;
  const char* message = gzerror(file, &err);
  std::string what = message ? message : "";
  gzclose(file);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END)) {
    throw std::runtime_error(path + ": cannot read BPE vocabulary (" + what + ")");
  }
  return text;
}

}  // namespace

BpeTokenizer::BpeTokenizer(const std::string& merges_path, int context_length)
    : Tokenizer(context_length) {
  // OpenCLIP's bytes_to_unicode(): printable bytes stand for themselves, the rest map to 256+.
  std::vector<int> order;
  for (int b = '!'; b <= '~'; ++b) order.push_back(b);
  for (int b = 0xA1; b <= 0xAC; ++b) order.push_back(b);
  for (int b = 0xAE; b <= 0xFF; ++b) order.push_back(b);
  std::vector<uint32_t> stand_in(256, 0);
  for (int b : order) stand_in[b] = b;
  int next = 0;
  for (int b = 0; b < 256; ++b) {
    if (std::find(order.begin(), order.end(), b) == order.end()) {
      order.push_back(b);
      stand_in[b] = 256 + next++;
    }
  }
  for (int b = 0; b < 256; ++b) {
    AppendUtf8(byte_encoder_[b], stand_in[b]);
    byte_decoder_[byte_encoder_[b]] = b;
  }
  for (int b : order) decoder_.push_back(byte_encoder_[b]);
  for (int b : order) decoder_.push_back(byte_encoder_[b] + "</w>");

  std::istringstream lines(ReadMaybeGzip(merges_path));
  std::string line;
  int line_number = 0;
  int merges = 0;
  while (std::getline(lines, line) && merges < kMaxMerges) {
    if (++line_number == 1 || line.empty()) continue;  // the first line is a version header
    std::istringstream fields(line);
    std::string first, second, extra;
    if (!(fields >> first >> second) || (fields >> extra)) {
      throw std::runtime_error(merges_path + ":" + std::to_string(line_number) +
                               ": a merge line needs exactly two symbols, got '" + line + "'");
    }
    merge_ranks_[{first, second}] = merges++;
    decoder_.push_back(first + second);
  }
  if (merges == 0) throw std::runtime_error(merges_path + ": no BPE merges found");
  for (const char* special : kSpecialTokens) decoder_.push_back(special);
  for (size_t i = 0; i < decoder_.size(); ++i) encoder_[decoder_[i]] = static_cast<int64_t>(i);
  start_ = static_cast<int64_t>(decoder_.size()) - 2;
  end_ = static_cast<int64_t>(decoder_.size()) - 1;
}

std::string BpeTokenizer::CleanText(const std::string& text) {
  std::string out;
  bool pending_space = false;
  // OpenCLIP's basic_clean unescapes HTML twice ("&amp;amp;" -> "&"), then whitespace_clean.
  for (uint32_t c : DecodeUtf8(UnescapeHtml(UnescapeHtml(text)))) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    AppendUtf8(out, ToLower(c));
  }
  return out;
}

std::vector<std::string> BpeTokenizer::PreTokenize(const std::string& text) {
  // <start_of_text>|<end_of_text>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+
  static const char* const kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  std::vector<uint32_t> cps = DecodeUtf8(text);
  std::vector<std::string> tokens;
  size_t i = 0;
  auto matches_ascii = [&](const char* literal) {
    size_t n = std::char_traits<char>::length(literal);
    if (i + n > cps.size()) return false;
    for (size_t k = 0; k < n; ++k) {
      if (ToLower(cps[i + k]) != static_cast<unsigned char>(literal[k])) return false;
    }
    return true;
  };
  auto take_literal = [&](const char* literal) {
    size_t n = std::char_traits<char>::length(literal);
    std::string token;
    for (size_t k = 0; k < n; ++k) AppendUtf8(token, cps[i + k]);
    tokens.push_back(token);
    i += n;
  };
  while (i < cps.size()) {
    bool matched = false;
    for (const char* special : kSpecialTokens) {
      if (!matched && matches_ascii(special)) {
        take_literal(special);
        matched = true;
      }
    }
    for (const char* contraction : kContractions) {
      if (!matched && matches_ascii(contraction)) {
        take_literal(contraction);
        matched = true;
      }
    }
    if (matched) continue;
    uint32_t c = cps[i];
    std::string token;
    if (IsSpace(c)) {
      ++i;
      continue;
    }
    if (IsLetter(c)) {
      while (i < cps.size() && IsLetter(cps[i])) AppendUtf8(token, cps[i++]);
    } else if (IsNumber(c)) {
      AppendUtf8(token, cps[i++]);
    } else {
      while (i < cps.size() && !IsSpace(cps[i]) && !IsLetter(cps[i]) && !IsNumber(cps[i])) {
        AppendUtf8(token, cps[i++]);
      }
    }
    tokens.push_back(token);
  }
  return tokens;
}

std::vector<std::string> BpeTokenizer::Bpe(const std::string& token) const {
  std::vector<std::string> word;
  for (unsigned char b : token) word.push_back(byte_encoder_[b]);
  if (word.empty()) return word;
  word.back() += "</w>";
  while (word.size() > 1) {
    int best_rank = INT_MAX;
    size_t best = 0;
    for (size_t k = 0; k + 1 < word.size(); ++k) {
      auto it = merge_ranks_.find({word[k], word[k + 1]});
      if (it != merge_ranks_.end() && it->second < best_rank) {
        best_rank = it->second;
        best = k;
      }
    }
    if (best_rank == INT_MAX) break;
    const std::string first = word[best], second = word[best + 1];
    std::vector<std::string> merged;
    for (size_t k = 0; k < word.size();) {
      if (k + 1 < word.size() && word[k] == first && word[k + 1] == second) {
        merged.push_back(first + second);
        k += 2;
      } else {
        merged.push_back(word[k++]);
      }
    }
    word.swap(merged);
  }
  return word;
}

std::vector<int64_t> BpeTokenizer::Encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (const std::string& piece : PreTokenize(CleanText(text))) {
    auto special = encoder_.find(piece);
    if (special != encoder_.end() && (special->second == start_ || special->second == end_)) {
      ids.push_back(special->second);
      continue;
    }
    for (const std::string& symbol : Bpe(piece)) {
      auto it = encoder_.find(symbol);
      if (it == encoder_.end()) {
        throw std::runtime_error("BPE symbol '" + symbol + "' missing from the vocabulary");
      }
      ids.push_back(it->second);
    }
  }
  return ids;
}

std::string BpeTokenizer::Decode(const std::vector<int64_t>& tokens) const {
  std::string bytes;
  for (int64_t t : tokens) {
    if (t == end_) break;  // what follows is padding
    if (t < 0 || t >= static_cast<int64_t>(decoder_.size()) || t == start_) continue;
    std::string symbol = decoder_[t];
    bool word_end = symbol.size() >= 4 && symbol.compare(symbol.size() - 4, 4, "</w>") == 0;
    if (word_end) symbol.resize(symbol.size() - 4);
    for (uint32_t cp : DecodeUtf8(symbol)) {
      std::string one;
      AppendUtf8(one, cp);
      auto it = byte_decoder_.find(one);
      if (it != byte_decoder_.end()) bytes += static_cast<char>(it->second);
    }
    if (word_end) bytes += ' ';
  }
  while (!bytes.empty() && bytes.back() == ' ') bytes.pop_back();
  return bytes;
}

}  // namespace dtrain::clip
