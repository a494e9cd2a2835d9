// The nodes that a job of the cluster's log dir quarantined within the cluster file's
// job.hold_back (a day by default, as the launch's --hold-back):
// a node whose fault comes and goes (a link that flaps, a node that rebooted, a GPU back after a
// reset) passes every check now and fails the next run. The doctor says so; `dtrain launch`
// holds such a node back as a spare, or leaves such a Slurm node out (launcher/node_history.h).
#include <fmt/format.h>

#include "doctor/checks.h"
#include "launcher/node_history.h"

namespace dtrain {

std::vector<Finding> CheckRecentQuarantines(const ClusterSpec& spec, const std::string& log_dir,
                                            int64_t now_us) {
  std::vector<Finding> out;
  const bool slurm = spec.transport == TransportKind::kSlurm;
  if ((spec.transport != TransportKind::kSsh && !slurm) || log_dir.empty()) return out;
  // On Slurm a node's name labels a placement: the Slurm node (machine) is what was quarantined.
  const double within_s = spec.job.hold_back_s;
  const auto recent = slurm ? RecentlyQuarantinedSlurmNodes(log_dir, within_s, now_us)
                            : RecentQuarantines(log_dir, within_s, now_us);
  for (const NodeSpec& node : spec.nodes) {
    auto past = recent.find(slurm ? node.machine : node.host);
    if (past == recent.end()) continue;
    // The window, or longer for a node that several jobs quarantined (GrownHoldBack).
    const std::string span = HoldBackSpan(past->second.held_s);
    Finding f;
    f.severity = Severity::kWarning;
    f.check = "history";
    f.nodes = {node.host};
    const std::string quarantined = DescribePastQuarantine(past->second, now_us);
    f.message = slurm ? fmt::format(
                            "node {} (Slurm node {}): {}; dtrain launch leaves that Slurm node out "
                            "of its batch jobs while Slurm can run them without it, for {} "
                            "after (--hold-back, job.hold_back)",
                            node.host, node.machine, quarantined, span)
                      : fmt::format(
                            "node {}: {}; dtrain launch holds it back as a spare while another "
                            "can take its place, for {} after (--hold-back, job.hold_back)",
                            node.host, quarantined, span);
    f.remedy = fmt::format(
        "see why in job {}'s record and logs (dtrain status --job {}); once the cause is fixed, "
        "dtrain launch --hold-back 0 picks it as the cluster file says",
        past->second.job, past->second.job);
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace dtrain
