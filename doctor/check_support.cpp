// The pieces the doctor's rule files share; see check_support.h.
#include "doctor/check_support.h"

#include <utility>

#include <fmt/format.h>

namespace dtrain::checks {

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

std::vector<const NodeFacts*> Reached(const std::vector<NodeFacts>& nodes) {
  std::vector<const NodeFacts*> out;
  for (const auto& n : nodes) {
    if (n.reached) out.push_back(&n);
  }
  return out;
}

Finding Make(Severity severity, std::string check, std::string fact, std::vector<std::string> nodes,
             std::string message, std::string remedy) {
  return Finding{severity,         std::move(check),   std::move(fact),
                 std::move(nodes), std::move(message), std::move(remedy)};
}

std::string EveryNodeChecked(size_t checked, size_t total) {
  if (checked >= total) return "every node";
  return fmt::format("the {} of {} nodes checked", checked, total);
}

std::string AllOrSomeOf(size_t judged, size_t total) {
  if (judged >= total) return fmt::format("all {}", judged);
  return fmt::format("{} of {}", judged, total);
}

std::string Times(long long count) {
  return count == 1 ? "once" : fmt::format("{} times", count);
}

std::string KibSize(long long kib) {
  if (kib < (1LL << 20)) return fmt::format("{} MiB", kib / 1024);
  return fmt::format("{:.1f} GiB", static_cast<double>(kib) / (1 << 20));
}

std::string JobProgram(const ClusterSpec& spec) {
  if (spec.job.command.empty()) return "dtrain-clip";
  const std::string& argv0 = spec.job.command[0];
  size_t slash = argv0.rfind('/');
  return argv0.substr(slash == std::string::npos ? 0 : slash + 1);
}

}  // namespace dtrain::checks
