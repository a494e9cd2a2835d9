// Checked, located reading of one parsed YAML document (the cluster file): each value read as the
// type a key expects, each error naming FILE:LINE:COL and what was expected.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace dtrain {

// Reads the values of one parsed YAML document. Holds the document's origin (its file) so that
// each error can say where it happened; each method either returns a checked value or throws
// UsageError("origin:line:col: ..."). Strings read are counted against a budget, so that aliases
// (*name, one node however often it is used) repeating a large value cannot expand a small file
// into gigabytes.
class YamlReader {
 public:
  explicit YamlReader(std::string origin) : origin_(std::move(origin)) {}

  const std::string& origin() const { return origin_; }

  // "origin:line:col", or the origin alone for a node without a position.
  std::string Where(const YAML::Mark& mark) const;
  [[noreturn]] void Fail(const YAML::Node& node, const std::string& message) const;

  // Checks that `node` is a map whose keys are all in `allowed`, each at most once.
  void ExpectMap(const YAML::Node& node, const std::string& what,
                 const std::set<std::string>& allowed) const;
  std::string String(const YAML::Node& node, const std::string& what) const;
  // A node's name or address (it goes into ssh, reports and job.json): printable, 1..255 bytes.
  std::string HostName(const YAML::Node& node, const std::string& what) const;
  long long Integer(const YAML::Node& node, const std::string& what) const;
  int IntegerIn(const YAML::Node& node, const std::string& what, long long lo, long long hi) const;
  int Port(const YAML::Node& node, const std::string& what) const;
  // true/yes/on/True or false/no/off/False.
  bool Bool(const YAML::Node& node, const std::string& what) const;
  std::vector<std::string> StringList(const YAML::Node& node, const std::string& what) const;
  // A map of NAME: value, names non-empty and unique.
  std::map<std::string, std::string> StringMap(const YAML::Node& node,
                                               const std::string& what) const;

 protected:
  // `text` with bytes outside printable ASCII as \xNN, cut at 80 bytes (for messages).
  static std::string Printable(const std::string& text);

 private:
  static constexpr size_t kMaxValueBytes = size_t{64} << 20;

  std::string origin_;
  mutable size_t values_read_ = 0;
};

}  // namespace dtrain
