// A validating JSON scanner (RFC 8259 grammar: objects, arrays, strings with escapes, numbers,
// literals) that records only where the outermost object's members start and end.
#include "launcher/timeline/trace_record.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launcher/error.h"

namespace dtrain {
namespace {

constexpr int kMaxDepth = 512;

// String bytes that stand for themselves: printable ASCII except '"' and '\\'.
struct PlainBytes {
  bool in[256] = {};
  constexpr PlainBytes() {
    for (int b = 0x20; b < 0x80; ++b) in[b] = b != '"' && b != '\\';
  }
  constexpr bool operator[](unsigned char b) const { return in[b]; }
};
constexpr PlainBytes kPlain;  // nlohmann's parser allows deeper, but no trace needs this

// Scans JSON values in `text` from `pos`; on a syntax error sets `error` and stops.
class JsonScanner {
 public:
  explicit JsonScanner(std::string_view text) : text_(text) {}

  size_t pos = 0;
  std::string error;

  void SkipSpace() {
    while (pos < text_.size() &&
           (text_[pos] == ' ' || text_[pos] == '\n' || text_[pos] == '\r' || text_[pos] == '\t'))
      ++pos;
  }
  bool At(char c) const { return pos < text_.size() && text_[pos] == c; }
  bool Fail(const std::string& what) {
    if (error.empty()) error = fmt::format("{} at byte {} of the record", what, pos);
    return false;
  }

  bool String() {
    if (!At('"')) return Fail("expected a string");
    ++pos;
    while (pos < text_.size()) {
      // Printable ASCII other than '"' and '\\' needs no look: most of every string.
      while (pos < text_.size() && kPlain[static_cast<unsigned char>(text_[pos])]) ++pos;
      if (pos >= text_.size()) break;
      const unsigned char c = text_[pos];
      if (c == '"') {
        ++pos;
        return true;
      }
      if (c < 0x20) return Fail("control character in a string");
      if (c >= 0x80) {
        if (!Utf8Sequence()) return Fail("invalid UTF-8 in a string");
        continue;
      }
      if (c == '\\') {
        if (++pos >= text_.size()) break;
        const char e = text_[pos];
        if (e == 'u') {
          for (int i = 1; i <= 4; ++i) {
            if (pos + i >= text_.size() ||
                !std::isxdigit(static_cast<unsigned char>(text_[pos + i])))
              return Fail("bad \\u escape");
          }
          pos += 4;
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return Fail("bad escape");
        }
      }
      ++pos;
    }
    return Fail("unterminated string");
  }

  bool Number() {
    const size_t start = pos;
    if (At('-')) ++pos;
    if (At('0')) {
      ++pos;
    } else if (!Digits()) {
      pos = start;
      return Fail("expected a value");
    }
    if (At('.')) {
      ++pos;
      if (!Digits()) return Fail("bad number");
    }
    if (At('e') || At('E')) {
      ++pos;
      if (At('+') || At('-')) ++pos;
      if (!Digits()) return Fail("bad number");
    }
    return true;
  }

  bool Value(int depth) {
    if (depth > kMaxDepth) return Fail("nested too deeply");
    SkipSpace();
    if (pos >= text_.size()) return Fail("expected a value");
    switch (text_[pos]) {
      case '"':
        return String();
      case '{':
        return Object(depth, nullptr);
      case '[':
        return Array(depth);
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        return Number();
    }
  }

  // `fields`, when given, receives the members of this object.
  bool Object(int depth, std::vector<TraceRecord::Field>* fields) {
    ++pos;  // '{'
    SkipSpace();
    if (At('}')) {
      ++pos;
      return true;
    }
    for (;;) {
      SkipSpace();
      const size_t key_start = pos;
      if (!String()) return false;
      const size_t key_end = pos;
      SkipSpace();
      if (!At(':')) return Fail("expected ':'");
      ++pos;
      SkipSpace();
      const size_t value_start = pos;
      if (!Value(depth + 1)) return false;
      if (fields) {
        fields->push_back({text_.substr(key_start + 1, key_end - key_start - 2),
                           text_.substr(value_start, pos - value_start)});
      }
      SkipSpace();
      if (At(',')) {
        ++pos;
        continue;
      }
      if (At('}')) {
        ++pos;
        return true;
      }
      return Fail("expected ',' or '}'");
    }
  }

 private:
  // One multi-byte UTF-8 character at pos (shortest form, no surrogates); moves past it.
  bool Utf8Sequence() {
    const unsigned char lead = text_[pos];
    size_t length;
    unsigned min;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2, min = 0x80;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3, min = 0x800;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4, min = 0x10000;
    } else {
      return false;
    }
    if (pos + length > text_.size()) return false;
    unsigned code = lead & (0x3F >> (length - 1));
    for (size_t i = 1; i < length; ++i) {
      const unsigned char c = text_[pos + i];
      if ((c & 0xC0) != 0x80) return false;
      code = (code << 6) | (c & 0x3F);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    pos += length;
    return true;
  }

  bool Digits() {
    const size_t start = pos;
    while (pos < text_.size() && text_[pos] >= '0' && text_[pos] <= '9') ++pos;
    return pos > start;
  }

  bool Literal(std::string_view word) {
    if (text_.substr(pos, word.size()) != word) return Fail("expected a value");
    pos += word.size();
    return true;
  }

  bool Array(int depth) {
    ++pos;  // '['
    SkipSpace();
    if (At(']')) {
      ++pos;
      return true;
    }
    for (;;) {
      if (!Value(depth + 1)) return false;
      SkipSpace();
      if (At(',')) {
        ++pos;
        continue;
      }
      if (At(']')) {
        ++pos;
        return true;
      }
      return Fail("expected ',' or ']'");
    }
  }

  std::string_view text_;
};

}  // namespace

std::string TraceRecord::Parse(std::string_view text) {
  fields_.clear();
  JsonScanner scan(text);
  scan.SkipSpace();
  if (!scan.At('{')) return fmt::format("not a JSON object (byte {} of the record)", scan.pos);
  if (!scan.Object(1, &fields_)) return scan.error;
  scan.SkipSpace();
  if (scan.pos != text.size()) return fmt::format("text after the object at byte {}", scan.pos);
  return "";
}

void TraceRecord::ParseOrThrow(std::string_view text, const std::string& path, uint64_t number) {
  std::string problem = Parse(text);
  if (!problem.empty()) throw Error(fmt::format("{}: record {}: {}", path, number, problem));
}

std::string_view TraceRecord::Find(std::string_view key) const {
  std::string_view found;
  for (const Field& field : fields_) {
    if (field.key == key) found = field.value;  // the last one wins, as in nlohmann::json
  }
  return found;
}

std::string TraceRecord::String(std::string_view key, const std::string& fallback) const {
  std::string_view value = Find(key);
  if (value.empty() || value[0] != '"') return fallback;
  return DecodeJsonString(value);
}

int64_t TraceRecord::Int(std::string_view key, int64_t fallback) const {
  std::string_view value = Find(key);
  if (value.empty() || !(value[0] == '-' || (value[0] >= '0' && value[0] <= '9'))) return fallback;
  char buffer[64];
  if (value.size() >= sizeof buffer) return fallback;
  value.copy(buffer, value.size());
  buffer[value.size()] = '\0';
  if (value.find_first_of(".eE") == std::string_view::npos) {
    const int64_t integer = std::strtoll(buffer, nullptr, 10);  // saturates, then is refused
    return integer >= -kMaxTraceInteger && integer <= kMaxTraceInteger ? integer : fallback;
  }
  return TraceIntegerOr(std::strtod(buffer, nullptr), fallback);
}

int64_t TraceIntegerOr(double value, int64_t fallback) {
  if (!(value >= -kMaxTraceInteger && value <= kMaxTraceInteger)) return fallback;
  return static_cast<int64_t>(value);
}

double TraceRecord::Number(std::string_view key, double fallback) const {
  std::string_view value = Find(key);
  if (value.empty() || !(value[0] == '-' || (value[0] >= '0' && value[0] <= '9'))) return fallback;
  char buffer[64];
  if (value.size() >= sizeof buffer) return fallback;
  value.copy(buffer, value.size());
  buffer[value.size()] = '\0';
  return std::strtod(buffer, nullptr);
}

std::string DecodeJsonString(std::string_view text) {
  if (text.size() >= 2 && text.find('\\') == std::string_view::npos) {
    return std::string(text.substr(1, text.size() - 2));
  }
  return nlohmann::json::parse(text).get<std::string>();
}

// ns as µs with 3 decimals, as "{:.3f}" would write them.
void AppendMicros(int64_t ns, std::string& out) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  char buffer[24];
  out.append(buffer, std::to_chars(buffer, buffer + sizeof buffer, ns / 1000).ptr);
  const int fraction = static_cast<int>(ns % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + fraction / 100),
                          static_cast<char>('0' + fraction / 10 % 10),
                          static_cast<char>('0' + fraction % 10)};
  out.append(digits, 4);
}

std::string EncodeJsonString(const std::string& value) {
  for (char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\') {
      return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  return '"' + value + '"';
}

}  // namespace dtrain
