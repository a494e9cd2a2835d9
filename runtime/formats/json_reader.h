// JsonValue: a small JSON reader for the few files dtrain-clip reads (OpenCLIP model configs).
// Parses RFC 8259 JSON into a tree; errors carry line and column. Not a general JSON library.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dtrain::clip {

// One JSON value; objects keep their keys sorted (duplicates are errors).
struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;
  int line = 1, column = 1;  // where the value starts in the text

  bool is_object() const { return kind == Kind::kObject; }
  bool is_number() const { return kind == Kind::kNumber; }
  bool is_string() const { return kind == Kind::kString; }
};

// Parses `text`; throws std::runtime_error "<origin>:<line>:<col>: <what>" on malformed input.
JsonValue ParseJson(const std::string& text, const std::string& origin);

}  // namespace dtrain::clip
