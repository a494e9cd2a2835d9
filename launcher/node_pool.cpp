// The pool's rules in order: spares from the file and --spares, the job's size from --nnodes,
// then per attempt the healthy nodes, spares last.
#include "launcher/node_pool.h"

#include <algorithm>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {

NodeCount ParseNodeCount(const std::string& text) {
  auto number = [&](const std::string& part) {
    if (part.empty() || part.size() > 6 ||
        part.find_first_not_of("0123456789") != std::string::npos)
      throw UsageError("--nnodes: expected N or MIN:MAX (whole numbers), not '" + text + "'");
    return std::stoi(part);
  };
  NodeCount count;
  const size_t colon = text.find(':');
  count.min = number(text.substr(0, colon));
  count.max = colon == std::string::npos ? count.min : number(text.substr(colon + 1));
  if (count.min < 1 || count.max < count.min) {
    throw UsageError("--nnodes: expected 1 <= MIN <= MAX, not '" + text + "'");
  }
  return count;
}

void MarkSpares(std::vector<NodeSpec>& nodes, int spares_from_end) {
  const int total = static_cast<int>(nodes.size());
  if (spares_from_end < 0 || spares_from_end >= total) {
    throw UsageError(
        fmt::format("--spares {}: the cluster has {} node(s); at least one must run "
                    "the job",
                    spares_from_end, total));
  }
  for (int i = total - spares_from_end; i < total; ++i) nodes[i].spare = true;
}

NodePool::NodePool(const std::vector<NodeSpec>& nodes, NodeCount count) {
  int active = 0;
  for (const NodeSpec& spec : nodes) {
    Node node;
    node.host = spec.host;
    node.spare = spec.spare;
    if (!node.spare) ++active;
    nodes_.push_back(std::move(node));
  }
  if (active == 0) throw UsageError("every node is a spare; at least one must run the job");
  max_ = count.max > 0 ? count.max : active;
  min_ = count.min > 0 ? count.min : max_;
  if (max_ > active) {
    throw UsageError(
        fmt::format("--nnodes {}:{}: only {} node(s) are not spares", min_, max_, active));
  }
}

std::vector<int> NodePool::Pick() const {
  std::vector<int> picked;
  for (bool spares : {false, true}) {
    for (int i = 0; i < size() && static_cast<int>(picked.size()) < max_; ++i) {
      if (nodes_[i].spare == spares && nodes_[i].quarantined.empty()) picked.push_back(i);
    }
  }
  if (static_cast<int>(picked.size()) < min_) return {};
  std::sort(picked.begin(), picked.end());
  return picked;
}

std::string NodePool::why_not() const {
  int healthy = 0;
  for (const Node& n : nodes_) healthy += n.quarantined.empty() ? 1 : 0;
  return fmt::format("{} healthy node(s) left, the job needs at least {}{}", healthy, min_,
                     min_ == max_ ? "" : " (--nnodes)");
}

void NodePool::Quarantine(int index, const std::string& why, bool may_return) {
  Node& node = nodes_.at(index);
  if (!node.quarantined.empty()) return;
  node.quarantined = why;
  node.may_return = may_return;
}

std::vector<int> NodePool::MayReturn() const {
  std::vector<int> out;
  for (int i = 0; i < size(); ++i) {
    const Node& node = nodes_[i];
    if (!node.quarantined.empty() && node.may_return && !node.returned) out.push_back(i);
  }
  return out;
}

void NodePool::Return(int index) {
  Node& node = nodes_.at(index);
  node.quarantined.clear();
  node.may_return = false;
  node.returned = true;
  node.failures = 0;
}

bool NodePool::CanGoOnWithout(int index) const {
  int others = 0;
  for (int i = 0; i < size(); ++i) others += i != index && nodes_[i].quarantined.empty() ? 1 : 0;
  return others >= min_;
}

std::string NodePool::Blame(int index, bool lost, const std::string& cause) {
  Node& node = nodes_.at(index);
  if (!node.quarantined.empty()) return "";
  ++node.failures;
  if (lost) {
    node.quarantined = cause;
    node.may_return = true;
  } else if (node.failures >= kFailuresToQuarantine) {
    node.quarantined = fmt::format("{} failed attempts, the last: {}", node.failures, cause);
  }
  return node.quarantined;
}

}  // namespace dtrain
