// The rule about the cluster file's own health checks (`health_checks:`): a node where one exits
// with a status other than 0, does not end within its limit, or gives no answer gets a finding of
// the check's severity, with the last line the check printed and its `fix`.
#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"

namespace dtrain {

using checks::AllOrSomeOf;
using checks::Make;
using checks::Reached;

namespace {

// The answer of check `index` on a node, or nullptr.
const HealthCheckAnswer* AnswerOf(const NodeFacts& node, size_t index) {
  for (const HealthCheckAnswer& a : node.health.health_checks) {
    if (a.index == index) return &a;
  }
  return nullptr;
}

// timeout(1) ends a command past its limit with 124 (TERM) or 137 (KILL a second later).
bool TimedOut(const HealthCheckAnswer& answer, const HealthCheckSpec& check) {
  return (answer.exit_status == 124 || answer.exit_status == 137) &&
         answer.ms + 100 >= check.timeout_s * 1000LL;
}

std::string Remedy(const HealthCheckSpec& check, const std::string& host) {
  if (!check.fix.empty()) return check.fix;
  return fmt::format("run it on {} to see why: {}", host, check.run);
}

}  // namespace

std::vector<Finding> CheckSiteHealthChecks(const ClusterSpec& spec,
                                           const std::vector<NodeFacts>& nodes,
                                           bool warning_checks) {
  std::vector<Finding> out;
  const std::vector<const NodeFacts*> reached = Reached(nodes);
  for (size_t i = 0; i < spec.health_checks.size(); ++i) {
    const HealthCheckSpec& check = spec.health_checks[i];
    if (check.warning && !warning_checks) continue;
    const Severity severity = check.warning ? Severity::kWarning : Severity::kError;
    const std::string what = fmt::format("health check '{}'", check.name);
    size_t passed = 0;
    const HealthCheckAnswer* slowest = nullptr;
    const NodeFacts* slowest_node = nullptr;
    for (const NodeFacts* n : reached) {
      const HealthCheckAnswer* answer = AnswerOf(*n, i);
      std::string message;
      if (!answer) {
        message =
            fmt::format("node {}: {} gave no answer (the probe ended without it)", n->host, what);
      } else if (TimedOut(*answer, check)) {
        message =
            fmt::format("node {}: {} did not end in {} s{}{}", n->host, what, check.timeout_s,
                        answer->last_line.empty() ? "" : "; its last line: ", answer->last_line);
      } else if (answer->exit_status != 0) {
        message =
            fmt::format("node {}: {} failed (exit {}){}{}", n->host, what, answer->exit_status,
                        answer->last_line.empty() ? "" : ": ", answer->last_line);
      }
      if (!message.empty()) {
        out.push_back(Make(severity, "health_check", "", {n->host}, std::move(message),
                           Remedy(check, n->host)));
        continue;
      }
      ++passed;
      if (!slowest || answer->ms > slowest->ms) {
        slowest = answer;
        slowest_node = n;
      }
    }
    if (passed == reached.size() && slowest) {
      out.push_back(Make(Severity::kOk, "health_check", "", {},
                         fmt::format("{} passed on {} node(s) (slowest {:.2f} s, on {})", what,
                                     AllOrSomeOf(passed, nodes.size()),
                                     static_cast<double>(slowest->ms) / 1000, slowest_node->host)));
    }
  }
  return out;
}

}  // namespace dtrain
