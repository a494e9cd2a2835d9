#include "runtime/data/shard_list.h"

#include <cstdlib>
#include <stdexcept>

namespace dtrain::clip {
namespace {

bool IsNumber(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// The alternatives of one brace group's body: "a,b,c" or "LO..HI".
std::vector<std::string> Alternatives(const std::string& body, const std::string& pattern) {
  const size_t dots = body.find("..");
  if (dots != std::string::npos && body.find(',') == std::string::npos) {
    const std::string lo = body.substr(0, dots), hi = body.substr(dots + 2);
    if (!IsNumber(lo) || !IsNumber(hi)) {
      throw std::runtime_error("shard pattern '" + pattern + "': {" + body +
                               "} is not a numeric range");
    }
    const long long first = std::atoll(lo.c_str()), last = std::atoll(hi.c_str());
    if (last < first) {
      throw std::runtime_error("shard pattern '" + pattern + "': range {" + body + "} goes down");
    }
    std::vector<std::string> values;
    for (long long v = first; v <= last; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      values.push_back(digits);
    }
    return values;
  }
  std::vector<std::string> values;
  size_t start = 0;
  while (true) {
    const size_t comma = body.find(',', start);
    values.push_back(body.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return values;
}

void Expand(const std::string& pattern, const std::string& whole, std::vector<std::string>& out) {
  const size_t open = pattern.find('{');
  if (open == std::string::npos) {
    out.push_back(pattern);
    return;
  }
  const size_t close = pattern.find('}', open);
  if (close == std::string::npos) {
    throw std::runtime_error("shard pattern '" + whole + "': '{' without a closing '}'");
  }
  const std::string head = pattern.substr(0, open), tail = pattern.substr(close + 1);
  for (const std::string& value : Alternatives(pattern.substr(open + 1, close - open - 1), whole)) {
    Expand(head + value + tail, whole, out);
  }
}

}  // namespace

std::vector<std::string> ExpandShardPattern(const std::string& pattern) {
  std::vector<std::string> shards;
  size_t start = 0;
  while (true) {
    const size_t sep = pattern.find("::", start);
    const std::string part = pattern.substr(start, sep - start);
    if (!part.empty()) Expand(part, pattern, shards);
    if (sep == std::string::npos) break;
    start = sep + 2;
  }
  if (shards.empty()) throw std::runtime_error("shard pattern '" + pattern + "' names no shard");
  return shards;
}

std::vector<std::string> ShardsFor(const std::vector<std::string>& shards, int rank, int world_size,
                                   int worker, int workers) {
  const size_t needed = static_cast<size_t>(world_size) * workers;
  if (shards.size() < needed) {
    throw std::runtime_error(
        "webdataset: " + std::to_string(shards.size()) + " shards for " +
        std::to_string(world_size) + " ranks x " + std::to_string(workers) +
        " loader threads: every loader needs a shard of its own; use at least " +
        std::to_string(needed) + " shards or fewer --workers");
  }
  std::vector<std::string> mine;
  size_t k = 0;  // position among this rank's shards
  for (size_t i = static_cast<size_t>(rank); i < shards.size(); i += world_size, ++k) {
    if (k % workers == static_cast<size_t>(worker)) mine.push_back(shards[i]);
  }
  return mine;
}

}  // namespace dtrain::clip
