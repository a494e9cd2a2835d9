// JsonObject: the runtime's one JSON writer. An object under construction, fields in insertion
// order, for metrics lines, trace records and their args. Torch-free, no JSON library.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dtrain::clip {

class JsonObject {
 public:
  JsonObject& Add(const std::string& key, double value);  // NaN and infinities become null
  JsonObject& Add(const std::string& key, int64_t value);
  JsonObject& Add(const std::string& key, int value) {
    return Add(key, static_cast<int64_t>(value));
  }
  JsonObject& Add(const std::string& key, size_t value) {
    return Add(key, static_cast<int64_t>(value));
  }
  JsonObject& Add(const std::string& key, bool value);
  JsonObject& Add(const std::string& key, const std::string& value);
  JsonObject& Add(const std::string& key, const char* value) {
    return Add(key, std::string(value));
  }
  JsonObject& Add(const std::string& key, const JsonObject& value);
  // {"key":value,...}
  std::string ToJson() const;
  // The fields without the braces: what a trace record's "args" holds (Timeline::Begin).
  std::string Body() const;

 private:
  std::vector<std::pair<std::string, std::string>> fields_;  // key, encoded value
};

}  // namespace dtrain::clip
