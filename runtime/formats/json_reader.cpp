#include "runtime/formats/json_reader.h"
#include "runtime/formats/json_text.h"

#include <cstdlib>
#include <stdexcept>

namespace dtrain::clip {
namespace {

// Recursive-descent parser over one text; tracks line/column for messages.
class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& origin) : text_(text), origin_(origin) {}

  JsonValue ParseDocument() {
    JsonValue value = ParseValue(0);
    SkipSpace();
    if (pos_ != text_.size()) Fail("unexpected text after the JSON value");
    return value;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::runtime_error(origin_ + ":" + std::to_string(line_) + ":" + std::to_string(column_) +
                             ": " + what);
  }

  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  char Take() {
    if (pos_ >= text_.size()) Fail("unexpected end of input");
    char c = text_[pos_++];
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    return c;
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) {
      Take();
    }
  }

  void Expect(const char* word) {
    for (const char* p = word; *p; ++p) {
      if (Peek() != *p) Fail(std::string("expected '") + word + "'");
      Take();
    }
  }

  JsonValue ParseValue(int depth) {
    if (depth > 64) Fail("nesting too deep");
    SkipSpace();
    JsonValue value;
    value.line = line_;
    value.column = column_;
    char c = Peek();
    if (c == '{') {
      ParseObject(value, depth);
    } else if (c == '[') {
      ParseArray(value, depth);
    } else if (c == '"') {
      value.kind = JsonValue::Kind::kString;
      value.string = ParseString();
    } else if (c == 't') {
      Expect("true");
      value.kind = JsonValue::Kind::kBool;
      value.boolean = true;
    } else if (c == 'f') {
      Expect("false");
      value.kind = JsonValue::Kind::kBool;
    } else if (c == 'n') {
      Expect("null");
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      value.kind = JsonValue::Kind::kNumber;
      value.number = ParseNumber();
    } else {
      Fail(c ? std::string("unexpected character '") + c + "'" : "unexpected end of input");
    }
    return value;
  }

  void ParseObject(JsonValue& value, int depth) {
    value.kind = JsonValue::Kind::kObject;
    Take();
    SkipSpace();
    if (Peek() == '}') {
      Take();
      return;
    }
    while (true) {
      SkipSpace();
      if (Peek() != '"') Fail("expected a string key");
      std::string key = ParseString();
      if (value.object.count(key)) Fail("duplicate key \"" + key + "\"");
      SkipSpace();
      if (Take() != ':') Fail("expected ':' after key \"" + key + "\"");
      value.object[key] = ParseValue(depth + 1);
      SkipSpace();
      char c = Take();
      if (c == '}') return;
      if (c != ',') Fail("expected ',' or '}' in object");
    }
  }

  void ParseArray(JsonValue& value, int depth) {
    value.kind = JsonValue::Kind::kArray;
    Take();
    SkipSpace();
    if (Peek() == ']') {
      Take();
      return;
    }
    while (true) {
      value.array.push_back(ParseValue(depth + 1));
      SkipSpace();
      char c = Take();
      if (c == ']') return;
      if (c != ',') Fail("expected ',' or ']' in array");
    }
  }

  unsigned ParseHex4() {
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      char h = Take();
      code <<= 4;
      if (h >= '0' && h <= '9') {
        code |= h - '0';
      } else if (h >= 'a' && h <= 'f') {
        code |= h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        code |= h - 'A' + 10;
      } else {
        Fail("bad \\u escape");
      }
    }
    return code;
  }

  std::string ParseString() {
    Take();  // opening quote
    std::string out;
    while (true) {
      char c = Take();
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) Fail("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      char e = Take();
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned code = ParseHex4();
          if (code >= 0xD800 && code < 0xDC00 && Peek() == '\\') {
            Take();
            if (Take() != 'u') Fail("bad surrogate pair");
            unsigned low = ParseHex4();
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(out, code);
          break;
        }
        default:
          Fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  double ParseNumber() {
    size_t start = pos_;
    while (pos_ < text_.size() &&
           std::string("+-0123456789.eE").find(Peek()) != std::string::npos) {
      Take();
    }
    std::string token = text_.substr(start, pos_ - start);
    char* end = nullptr;
    double number = std::strtod(token.c_str(), &end);
    if (end != token.c_str() + token.size()) Fail("bad number '" + token + "'");
    return number;
  }

  const std::string& text_;
  const std::string& origin_;
  size_t pos_ = 0;
  int line_ = 1, column_ = 1;
};

}  // namespace

JsonValue ParseJson(const std::string& text, const std::string& origin) {
  return JsonParser(text, origin).ParseDocument();
}

}  // namespace dtrain::clip
