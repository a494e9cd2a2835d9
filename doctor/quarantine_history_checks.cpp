// The nodes that a job of the cluster's log dir quarantined within a day (--hold-back's default):
// a node whose fault comes and goes (a link that flaps, a node that rebooted, a GPU back after a
// reset) passes every check now and fails the next run. The doctor says so; `dtrain launch`
// holds such a node back as a spare (launcher/node_history.h).
#include <fmt/format.h>

#include "doctor/checks.h"
#include "launcher/node_history.h"

namespace dtrain {

std::vector<Finding> CheckRecentQuarantines(const ClusterSpec& spec, const std::string& log_dir,
                                            int64_t now_us) {
  std::vector<Finding> out;
  if (spec.transport != TransportKind::kSsh || log_dir.empty()) return out;
  const auto recent = RecentQuarantines(log_dir, kDefaultHoldBackS, now_us);
  for (const NodeSpec& node : spec.nodes) {
    auto past = recent.find(node.host);
    if (past == recent.end()) continue;
    Finding f;
    f.severity = Severity::kWarning;
    f.check = "history";
    f.nodes = {node.host};
    f.message = fmt::format(
        "node {}: {}; dtrain launch holds it back as a spare while another can take its place, "
        "for a day after (--hold-back)",
        node.host, DescribePastQuarantine(past->second, now_us));
    f.remedy = fmt::format(
        "see why in job {}'s record and logs (dtrain status --job {}); once the cause is fixed, "
        "dtrain launch --hold-back 0 picks it as the cluster file says",
        past->second.job, past->second.job);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace dtrain
