// Checked, located reading of one parsed YAML document (yaml_reader.h).
#include "launcher/yaml_reader.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {

std::string YamlReader::Where(const YAML::Mark& mark) const {
  if (mark.is_null()) return origin_;
  return fmt::format("{}:{}:{}", origin_, mark.line + 1, mark.column + 1);
}

void YamlReader::Fail(const YAML::Node& node, const std::string& message) const {
  throw UsageError(Where(node.Mark()) + ": " + message);
}

void YamlReader::ExpectMap(const YAML::Node& node, const std::string& what,
                           const std::set<std::string>& allowed) const {
  if (!node.IsMap()) Fail(node, fmt::format("{}: expected a map", what));
  std::set<std::string> seen;
  for (const auto& item : node) {
    const YAML::Node& key = item.first;
    if (!key.IsScalar()) Fail(key, fmt::format("{}: expected a plain key", what));
    const std::string name = key.Scalar();
    if (!allowed.count(name)) {
      std::string known;
      for (const auto& k : allowed) known += (known.empty() ? "" : ", ") + k;
      Fail(key, fmt::format("unknown key '{}' in {}; expected one of: {}", name, what, known));
    }
    if (!seen.insert(name).second) Fail(key, fmt::format("duplicate key '{}' in {}", name, what));
  }
}

std::string YamlReader::String(const YAML::Node& node, const std::string& what) const {
  if (!node.IsScalar()) Fail(node, fmt::format("{}: expected a string", what));
  // Aliases (*name) share one node however often they are used; each use is read again here.
  // A budget on what is read keeps a small file from expanding into gigabytes.
  values_read_ += node.Scalar().size() + 16;
  if (values_read_ > kMaxValueBytes) {
    Fail(node, fmt::format("the file expands to more than {} MiB of values (aliases such as "
                           "*name repeating a large map?)",
                           kMaxValueBytes >> 20));
  }
  return node.Scalar();
}

std::string YamlReader::HostName(const YAML::Node& node, const std::string& what) const {
  std::string value = String(node, what);
  if (value.empty()) Fail(node, what + ": expected a non-empty name");
  if (value.size() > 255) Fail(node, fmt::format("{}: {} bytes; at most 255", what, value.size()));
  for (unsigned char c : value) {
    if (c <= 0x20 || c >= 0x7f) {
      Fail(node, fmt::format("{}: byte 0x{:02x} in '{}'; expected letters, digits, '.', "
                             "'-', '_', ':' or '@'",
                             what, c, Printable(value)));
    }
  }
  return value;
}

long long YamlReader::Integer(const YAML::Node& node, const std::string& what) const {
  if (!node.IsScalar()) Fail(node, fmt::format("{}: expected an integer", what));
  const std::string& text = node.Scalar();
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0) {
    Fail(node, fmt::format("{}: expected an integer, got '{}'", what, text));
  }
  return value;
}

int YamlReader::IntegerIn(const YAML::Node& node, const std::string& what, long long lo,
                          long long hi) const {
  long long value = Integer(node, what);
  if (value < lo || value > hi) {
    Fail(node, fmt::format("{}: expected an integer from {} to {}, got {}", what, lo, hi, value));
  }
  return static_cast<int>(value);
}

int YamlReader::Port(const YAML::Node& node, const std::string& what) const {
  return IntegerIn(node, what + " (a TCP port)", 1, 65535);
}

bool YamlReader::Bool(const YAML::Node& node, const std::string& what) const {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "yes" || s == "on" || s == "True") return true;
    if (s == "false" || s == "no" || s == "off" || s == "False") return false;
  }
  Fail(node, fmt::format("{}: expected true or false", what));
}

std::vector<std::string> YamlReader::StringList(const YAML::Node& node,
                                                const std::string& what) const {
  if (!node.IsSequence()) Fail(node, fmt::format("{}: expected a list of strings", what));
  std::vector<std::string> out;
  for (const auto& item : node) out.push_back(String(item, what + " entry"));
  return out;
}

std::map<std::string, std::string> YamlReader::StringMap(const YAML::Node& node,
                                                         const std::string& what) const {
  if (!node.IsMap()) Fail(node, fmt::format("{}: expected a map of NAME: value", what));
  std::map<std::string, std::string> out;
  for (const auto& item : node) {
    std::string key = String(item.first, what + " key");
    if (key.empty()) Fail(item.first, fmt::format("{}: empty name", what));
    if (out.count(key)) Fail(item.first, fmt::format("duplicate key '{}' in {}", key, what));
    out[key] = String(item.second, fmt::format("{}.{}", what, key));
  }
  return out;
}

std::string YamlReader::Printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text.substr(0, 80)) {
    out += (c >= 0x20 && c < 0x7f) ? std::string(1, static_cast<char>(c))
                                   : fmt::format("\\x{:02x}", c);
  }
  return text.size() > 80 ? out + "..." : out;
}

}  // namespace dtrain
