#include "runtime/formats/json_object.h"

#include <cmath>
#include <cstdio>

#include "runtime/formats/json_text.h"

namespace dtrain::clip {

JsonObject& JsonObject::Add(const std::string& key, double value) {
  char buf[32];
  if (std::isfinite(value)) {
    std::snprintf(buf, sizeof buf, "%.9g", value);
  } else {
    std::snprintf(buf, sizeof buf, "null");  // JSON has no NaN/Inf
  }
  fields_.emplace_back(key, buf);
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, int64_t value) {
  fields_.emplace_back(key, std::to_string(value));
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, bool value) {
  fields_.emplace_back(key, value ? "true" : "false");
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, const std::string& value) {
  std::string encoded;
  AppendJsonString(encoded, value);
  fields_.emplace_back(key, std::move(encoded));
  return *this;
}

JsonObject& JsonObject::Add(const std::string& key, const JsonObject& value) {
  fields_.emplace_back(key, value.ToJson());
  return *this;
}

std::string JsonObject::Body() const {
  std::string out;
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i) out += ',';
    AppendJsonString(out, fields_[i].first);
    out += ':';
    out += fields_[i].second;
  }
  return out;
}

std::string JsonObject::ToJson() const {
  return "{" + Body() + "}";
}

}  // namespace dtrain::clip
