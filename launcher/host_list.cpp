// Both forms end in the same checks as the cluster file: a host at most once, slots >= 1.
#include "launcher/host_list.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

// "4" -> 4; anything but a whole number in 1..4096 -> -1.
int SlotCount(const std::string& text) {
  if (text.empty() || text.size() > 4) return -1;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
  }
  const int n = std::stoi(text);
  return n >= 1 && n <= 4096 ? n : -1;
}

NodeSpec Node(const std::string& host, int slots) {
  NodeSpec node;
  node.host = host;
  node.address = host;
  node.slots = slots;
  return node;
}

// "host" or "host:slots"; `where` prefixes errors.
NodeSpec HostWithSlots(const std::string& entry, const std::string& where) {
  const size_t colon = entry.rfind(':');
  if (colon == std::string::npos) return Node(entry, 1);
  const std::string host = entry.substr(0, colon);
  const int slots = SlotCount(entry.substr(colon + 1));
  if (host.empty() || slots < 0) {
    throw UsageError(fmt::format("{}'{}': expected HOST or HOST:SLOTS with SLOTS a number from 1 "
                                 "to 4096, e.g. gpu-a:4",
                                 where, entry));
  }
  return Node(host, slots);
}

void CheckUnique(const std::vector<NodeSpec>& nodes, const std::string& where) {
  std::set<std::string> seen;
  for (const NodeSpec& node : nodes) {
    if (!seen.insert(node.host).second) {
      throw UsageError(fmt::format("{}host '{}' is listed twice; give it once with all its slots "
                                   "({}:N)",
                                   where, node.host, node.host));
    }
  }
}

}  // namespace

std::vector<NodeSpec> ParseHostList(const std::string& list) {
  std::vector<NodeSpec> nodes;
  std::stringstream entries(list);
  for (std::string entry; std::getline(entries, entry, ',');) {
    if (entry.empty()) continue;
    nodes.push_back(HostWithSlots(entry, "-H: "));
  }
  if (nodes.empty()) {
    throw UsageError("-H: expected HOST[:SLOTS],... (e.g. -H gpu-a:4,gpu-b:4)");
  }
  CheckUnique(nodes, "-H: ");
  return nodes;
}

std::vector<NodeSpec> ParseHostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw UsageError(fmt::format("{}: cannot read the hostfile: {}; expected one 'HOST slots=N' "
                                 "line per node",
                                 path, std::strerror(errno)));
  }
  std::vector<NodeSpec> nodes;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const std::string where = fmt::format("{}:{}: ", path, line_number);
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::string host;
    if (!(words >> host)) continue;
    NodeSpec node = HostWithSlots(host, where);
    for (std::string word; words >> word;) {
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq);
      const int value = eq == std::string::npos ? -1 : SlotCount(word.substr(eq + 1));
      if ((key == "slots" || key == "max_slots" || key == "max-slots") && value > 0) {
        if (key == "slots") node.slots = value;
        continue;
      }
      throw UsageError(fmt::format("{}'{}': expected slots=N (N from 1 to 4096) after the host",
                                   where, word));
    }
    nodes.push_back(node);
  }
  if (nodes.empty()) {
    throw UsageError(path + ": the hostfile lists no hosts; expected one 'HOST slots=N' line per "
                            "node");
  }
  CheckUnique(nodes, path + ": ");
  return nodes;
}

}  // namespace dtrain
