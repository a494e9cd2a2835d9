// The straggler said on the console and in job.json; the node that leaves for it quarantined.
#include "launcher/straggler_leaves.h"

#include <cstdio>

#include <fmt/format.h>

#include "launcher/node_health_checks.h"
#include "launcher/rank_log.h"

namespace dtrain {

bool SayStraggler(Job& job, const Straggler& straggler) {
  JobRecord& record = job.record;
  const int index = NodeIndex(job.spec, straggler.host);
  const bool can_leave = index >= 0 && job.pool.CanGoOnWithout(index);
  const bool leaves = job.settings.straggler_leaves && can_leave;
  std::string then;
  if (leaves) {
    then = fmt::format("node {} leaves the job (--on-straggler leave)", straggler.host);
    const double grace_s = StragglerGraceSeconds(job.options.grace_period_s, straggler);
    if (grace_s > job.options.grace_period_s) {
      then += fmt::format(
          "; SIGKILL comes {:.3g} s after SIGTERM, the grace period and two of its steps, for it "
          "to reach its checkpoint",
          grace_s);
    }
  } else if (job.settings.straggler_leaves) {
    then = fmt::format(
        "node {} stays: the job cannot go on without it (no spare, and --nnodes MIN not below "
        "its nodes)",
        straggler.host);
  } else if (can_leave) {
    then = fmt::format("the job can go on without node {}: --on-straggler leave", straggler.host);
  } else {
    then = "the job runs at its pace";
  }
  const std::string what = "straggler: " + straggler.Describe();
  std::fprintf(stderr, "dtrain: warning: %s; %s\n", what.c_str(), then.c_str());
  std::fflush(stderr);
  record.events.push_back({WallMicros(), "straggler", what + "; " + then, ""});
  WriteJobRecord(job.folder.job_dir, record);
  return leaves;
}

bool LeaveSlowNode(Job& job, const UnfitNode& slow) {
  JobRecord& record = job.record;
  const int index = NodeIndex(job.spec, slow.host);
  if (index < 0) return false;
  Quarantine(job, index, slow.why, /*may_return=*/false);
  ++job.returns;
  job.left_slow = slow.host;
  JobAttempt& this_attempt = record.attempts.back();
  this_attempt.cause = "straggler";
  this_attempt.blamed_node = slow.host;
  this_attempt.detail = slow.why;
  std::string nodes;
  for (int i : job.pool.Pick()) nodes += (nodes.empty() ? "" : ",") + job.spec.nodes[i].host;
  std::fprintf(stderr,
               "dtrain: job %s restarts on %s without node %s, a straggler (not counted against "
               "--max-restarts)\n",
               record.name.c_str(), nodes.c_str(), slow.host.c_str());
  WriteJobRecord(job.folder.job_dir, record);
  return true;
}

}  // namespace dtrain
