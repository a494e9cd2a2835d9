// Hostlist expansion as Slurm writes SLURM_JOB_NODELIST and squeue's %N.
#include "launcher/slurm/slurm_hostlist.h"

#include <cstddef>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

[[noreturn]] void Malformed(const std::string& hostlist, const std::string& why) {
  throw Error(fmt::format("Slurm hostlist '{}': {}", hostlist, why));
}

// Splits at commas that are not inside brackets.
std::vector<std::string> SplitTopLevel(const std::string& hostlist) {
  std::vector<std::string> items;
  std::string current;
  int depth = 0;
  for (char c : hostlist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) Malformed(hostlist, "']' without '['");
    if (c == ',' && depth == 0) {
      items.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) Malformed(hostlist, "'[' without ']'");
  items.push_back(current);
  return items;
}

constexpr size_t kMaxHosts = 65536;

bool AllDigits(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// "01-03,07" -> 01 02 03 07.
std::vector<std::string> ExpandRanges(const std::string& ranges, const std::string& hostlist) {
  std::vector<std::string> values;
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t comma = ranges.find(',', start);
    if (comma == std::string::npos) comma = ranges.size();
    const std::string part = ranges.substr(start, comma - start);
    const size_t dash = part.find('-');
    const std::string low = part.substr(0, dash);
    const std::string high = dash == std::string::npos ? low : part.substr(dash + 1);
    if (!AllDigits(low) || !AllDigits(high)) {
      Malformed(hostlist, fmt::format("'{}' is not a number or a range like 01-03", part));
    }
    // Host numbers are short; a longer one would not fit in an unsigned long.
    if (low.size() > 9 || high.size() > 9) {
      Malformed(hostlist, fmt::format("'{}' has a number of more than 9 digits", part));
    }
    const unsigned long first = std::stoul(low);
    const unsigned long last = std::stoul(high);
    if (last < first) Malformed(hostlist, fmt::format("range '{}' runs backwards", part));
    if (last - first > 100000) Malformed(hostlist, fmt::format("range '{}' is too long", part));
    for (unsigned long v = first; v <= last; ++v) {
      values.push_back(fmt::format("{:0{}}", v, low.size()));
    }
    start = comma + 1;
  }
  return values;
}

void ExpandName(const std::string& name, const std::string& hostlist,
                std::vector<std::string>& hosts) {
  const size_t open = name.find('[');
  if (open == std::string::npos) {
    if (name.find(']') != std::string::npos) Malformed(hostlist, "']' without '['");
    // Ranges multiply (a[1-99999]b[1-99999]); no job has more nodes than ranks.
    if (hosts.size() >= kMaxHosts) {
      Malformed(hostlist, fmt::format("expands to more than {} hosts", kMaxHosts));
    }
    hosts.push_back(name);
    return;
  }
  const size_t close = name.find(']', open);
  if (close == std::string::npos) Malformed(hostlist, "'[' without ']'");
  const std::string prefix = name.substr(0, open);
  const std::string rest = name.substr(close + 1);
  for (const std::string& value : ExpandRanges(name.substr(open + 1, close - open - 1), hostlist)) {
    ExpandName(prefix + value + rest, hostlist, hosts);
  }
}

}  // namespace

std::vector<std::string> ExpandHostlist(const std::string& hostlist) {
  std::vector<std::string> hosts;
  if (hostlist.empty()) return hosts;
  for (const std::string& item : SplitTopLevel(hostlist)) {
    if (item.empty()) Malformed(hostlist, "empty host name");
    ExpandName(item, hostlist, hosts);
  }
  return hosts;
}

}  // namespace dtrain
