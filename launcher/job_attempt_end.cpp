// EndAttempt (job_attempt.h), with what it says on the console: why the attempt ended, the root
// cause and the failed rank's last lines, the nodes quarantined, and whether the job runs again.
#include "launcher/job_attempt.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/error.h"
#include "launcher/exit_abort_note.h"
#include "launcher/hangs/stall_watch.h"
#include "launcher/log_reader.h"
#include "launcher/node_health_checks.h"
#include "launcher/node_return_wait.h"
#include "launcher/oom_kill.h"
#include "launcher/rank_error_file.h"
#include "launcher/straggler_leaves.h"
#include "launcher/timeline/trace_fetch.h"

namespace dtrain {
namespace {

constexpr int kFailureTailLines = 20;

// "rank 3 on node gpu-b failed: exit 7", then the root cause when a rank's @record error file
// gives one (rank, node, time, exception, innermost file:line), then the last lines of its log,
// then a note when those show torch's abort at interpreter exit (exit_abort_note.h) or the
// kernel's OOM killer (oom_kill.h).
// `tail`: the last lines of its log in this attempt.
void ReportFailure(const RankPlan& plan, const JobOutcome& outcome, const std::string& job_dir,
                   const std::vector<std::string>& tail, const std::optional<RankError>& cause) {
  const RankSlot& slot = plan.ranks.at(outcome.failed_rank);
  const ExitStatus& status = outcome.statuses.at(outcome.failed_rank);
  const std::string log = RankLogPath(job_dir, slot.rank);
  std::string text = fmt::format("dtrain: rank {} on node {} failed: {}\n", slot.rank, slot.host,
                                 status.Describe());
  if (cause) text += DescribeRankError(*cause, plan.ranks.at(cause->rank).host);
  if (tail.empty()) {
    text += fmt::format("dtrain: it wrote nothing to {}\n", log);
  } else {
    text += fmt::format("dtrain: last {} lines of {}:\n", tail.size(), log);
    for (const std::string& line : tail)
      text += fmt::format("  [{}:{}] {}\n", slot.host, slot.rank, line);
  }
  text += ExitAbortNote(status, tail);
  text += OomKillNote(status, tail);
  std::fputs(text.c_str(), stderr);
}

// The last line of a job stopped for a stall names the rank the others waited for.
void ReportStallStop(const RankPlan& plan, const JobOutcome& outcome, const std::string& job) {
  const StallReport& stall = *outcome.stall;
  std::string who = "no rank could be singled out";
  if (outcome.failed_rank >= 0) {
    const RankSlot& slot = plan.ranks.at(outcome.failed_rank);
    who = fmt::format("rank {} on node {} stalled", slot.rank, slot.host);
  }
  std::fprintf(stderr, "dtrain: %s\ndtrain: job %s stopped (--on-stall stop): %s\n",
               stall.summary.c_str(), job.c_str(), who.c_str());
}

// "dtrain: node node1 lost: no answer for 10 s, last seen 12:01:07; its rank(s) 1 ended with it".
void ReportNodeLost(const RankPlan& plan, const AttemptVerdict& verdict) {
  std::string ranks;
  for (const RankSlot& slot : plan.ranks) {
    if (slot.host == verdict.blamed_host)
      ranks += (ranks.empty() ? "" : ",") + std::to_string(slot.rank);
  }
  std::fprintf(stderr, "dtrain: %s; its rank(s) %s went with it; every other rank stopped\n",
               verdict.detail.c_str(), ranks.c_str());
}

// Waits out the backoff before a restart; false when an interrupt came meanwhile (or before:
// the launch's InterruptHandlers, launch.cpp, keep the flag from the attempt's end on).
bool WaitBeforeRestart(double seconds) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (JobSupervisor::InterruptSignal() != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return JobSupervisor::InterruptSignal() == 0;
}

// Ctrl-C after an attempt ended and before the job restarted: the job ends interrupted.
void EndInterruptedBeforeRestart(JobRecord& record) {
  const int signal = JobSupervisor::InterruptSignal();
  record.status = "interrupted";
  record.exit_code = 128 + signal;
  std::fprintf(stderr, "dtrain: job %s interrupted by %s before it restarted\n",
               record.name.c_str(), SignalName(signal).c_str());
}

// The root cause of a failed attempt from the ranks' @record error files (rank_error_file.h);
// those SSH nodes wrote on their own disks are fetched into the job folder first.
std::optional<RankError> FindRootCause(Job& job, int attempt, int failed_rank) {
  const std::string& job_dir = job.folder.job_dir;
  std::vector<std::pair<int, std::string>> files;
  bool missing = false;
  for (const RankSlot& slot : job.record.plan.ranks) {
    files.emplace_back(slot.rank, ErrorFilePath(job_dir, attempt, slot.rank));
    missing = missing || ::access(files.back().second.c_str(), F_OK) != 0;
  }
  if (missing && job.spec.transport == TransportKind::kSsh) {
    try {
      FetchRemoteErrorFiles(job_dir, ReadJobSummary(job_dir), job.spec.ssh, attempt);
    } catch (const Error& e) {
      std::fprintf(stderr, "dtrain: warning: error files not fetched: %s\n", e.what());
    }
  }
  return FirstRankError(files, failed_rank);
}

// "node0,node2,node3 (spare)": the nodes an attempt runs on, as the console names them.
std::string NodeList(const Job& job, const std::vector<int>& nodes) {
  std::string list;
  for (int i : nodes) {
    list += (list.empty() ? "" : ",") + job.spec.nodes[i].host;
    if (job.spec.nodes[i].spare) list += " (spare)";
  }
  return list;
}

// Whether every rank of the attempt exited 0 (it finished before a stop reached it).
bool EveryRankSucceeded(const JobOutcome& outcome) {
  for (const auto& [rank, status] : outcome.statuses) {
    if (!status.ok()) return false;
  }
  return true;
}

// The attempt was stopped to take back node `outcome.returned`, fit again: it rejoins the pool
// and the job restarts at once on the nodes the pool picks, outside the restart budget.
bool TakeNodeBack(Job& job, const JobOutcome& outcome) {
  JobRecord& record = job.record;
  const std::string& host = outcome.returned;
  const int index = NodeIndex(job.spec, host);
  if (index < 0) return false;
  TakeBack(job, index);
  ++job.returns;
  job.returning = host;
  JobAttempt& this_attempt = record.attempts.back();
  this_attempt.cause = "node-returned";
  this_attempt.detail =
      fmt::format("node {} passed the health checks {} rounds in a row", host, kReturnRounds);
  record.events.push_back({WallMicros(), "node_returned", this_attempt.detail, ""});
  const std::string nodes = NodeList(job, job.pool.Pick());
  std::fprintf(stderr,
               "dtrain: %s; job %s restarts on %s to take it back (not counted against "
               "--max-restarts)\n",
               this_attempt.detail.c_str(), record.name.c_str(), nodes.c_str());
  WriteJobRecord(job.folder.job_dir, record);
  return true;
}

// Runs the check before the restart (node_health_checks.h); the nodes `attempt` ran on that it
// quarantined. Its seconds in `checked_s`.
std::vector<std::string> NodesOfAttemptFoundUnfit(Job& job, const JobAttempt& attempt,
                                                  double& checked_s) {
  auto quarantined = [&](const std::string& host) {
    const int index = NodeIndex(job.spec, host);
    return index >= 0 && !job.pool.quarantined(index).empty();
  };
  std::set<std::string> before;
  for (const std::string& host : attempt.nodes) {
    if (quarantined(host)) before.insert(host);
  }
  checked_s = CheckNodesBeforeRestart(job);
  std::vector<std::string> found;
  for (const std::string& host : attempt.nodes) {
    if (!before.count(host) && quarantined(host)) found.push_back(host);
  }
  return found;
}

}  // namespace

bool EndAttempt(Job& job, const JobOutcome& outcome, int attempt,
                const std::map<int, uint64_t>& log_start) {
  JobRecord& record = job.record;
  job.returning.clear();
  job.left_slow.clear();
  JobAttempt& this_attempt = record.attempts.back();
  this_attempt.ended_us = WallMicros();
  this_attempt.exit_code = outcome.exit_code;
  this_attempt.failed_rank = outcome.failed_rank;
  const int interrupt = JobSupervisor::InterruptSignal();
  AttemptVerdict verdict = JudgeAttempt(record.plan, outcome, this_attempt.started_us, interrupt);
  this_attempt.fault_us = outcome.failed_us;
  record.rank_status = outcome.statuses;
  record.exit_code = outcome.exit_code;
  record.failed_rank = outcome.failed_rank;
  if (!outcome.returned.empty() && interrupt == 0 && !EveryRankSucceeded(outcome) &&
      TakeNodeBack(job, outcome)) {
    return true;
  }
  if (outcome.unfit && outcome.unfit->straggler && interrupt == 0 && !EveryRankSucceeded(outcome) &&
      LeaveSlowNode(job, *outcome.unfit)) {
    return true;
  }
  // A straggler's node that did not leave (the job ended meanwhile, or was interrupted) is not
  // unfit: nothing more is said of it.
  const bool unfit = outcome.unfit && !outcome.unfit->straggler;
  if (unfit && !outcome.unfit->alike.empty()) {
    std::string hosts = outcome.unfit->host;
    for (const std::string& other : outcome.unfit->alike) hosts += ", " + other;
    std::fprintf(stderr,
                 "dtrain: nodes %s failed the health watch %.1f s into the attempt: %s; every "
                 "rank stopped (which of them to leave out is the check before the restart's "
                 "to tell)\n",
                 hosts.c_str(), outcome.unfit->found_after_s, outcome.unfit->why.c_str());
  } else if (unfit) {
    std::fprintf(stderr,
                 "dtrain: node %s failed the health watch %.1f s into the attempt: %s; every "
                 "rank stopped\n",
                 outcome.unfit->host.c_str(), outcome.unfit->found_after_s,
                 outcome.unfit->why.c_str());
  } else if (!outcome.store_failure.empty()) {
    std::fprintf(stderr, "dtrain: %s; every rank stopped\n",
                 StoreFailure(record.plan, outcome.store_failure).c_str());
  } else if (verdict.node_lost) {
    job.lost_nodes.insert(verdict.blamed_host);
    ReportNodeLost(record.plan, verdict);
  } else if (outcome.stall) {
    ReportStallStop(record.plan, outcome, record.name);
  } else if (outcome.failed_rank >= 0) {
    const std::optional<RankError> cause = FindRootCause(job, attempt, outcome.failed_rank);
    if (cause) {
      record.events.push_back({WallMicros(), "root_cause",
                               RankErrorLine(*cause, record.plan.ranks.at(cause->rank).host),
                               cause->path});
    }
    const std::vector<std::string> tail =
        LastLines(RankLogPath(job.folder.job_dir, outcome.failed_rank), kFailureTailLines,
                  log_start.at(outcome.failed_rank));
    ReportFailure(record.plan, outcome, job.folder.job_dir, tail, cause);
    // A collective that timed out names the rank that waited, not the one it waited for.
    std::string said = cause ? cause->message + "\n" : "";
    for (const std::string& line : tail) said += line + "\n";
    MarkCollectiveTimeout(record.plan, verdict, said);
    MarkOutOfMemory(outcome.statuses.at(outcome.failed_rank), verdict, said);
    MarkWatchdogTimer(verdict, said);
  }
  this_attempt.cause = verdict.cause;
  this_attempt.blamed_node = verdict.blamed_host;
  this_attempt.detail = verdict.detail;
  // This machine alone (transport local) is never excluded for failures: there is no other.
  if (interrupt == 0 && unfit && !outcome.unfit->alike.empty()) {
    // A pair: none is quarantined here; the check before the restart, with a witness, blames
    // one (node_health_checks.cpp), or both where it cannot tell.
  } else if (interrupt == 0 && unfit) {
    const int index = NodeIndex(job.spec, outcome.unfit->host);
    if (index >= 0)
      QuarantineUnfit(job, index, "failed the health watch during the run: " + outcome.unfit->why);
  } else if (interrupt == 0 && !verdict.blamed_host.empty() &&
             (verdict.node_lost || job.spec.transport != TransportKind::kLocal)) {
    const int index = NodeIndex(job.spec, verdict.blamed_host);
    if (index >= 0) {
      const std::string why = job.pool.Blame(index, verdict.node_lost, verdict.detail);
      if (!why.empty()) Quarantine(job, index, why, verdict.node_lost);
    }
  }
  LeaveOutNodesWarnedOf(job, interrupt == 0 && outcome.exit_code != 0 && !verdict.deterministic);

  std::vector<int> next_nodes;
  double checked_s = 0;                        // the health check's time, taken out of the backoff
  double waited_s = 0;                         // ... and the wait for nodes to return
  const int restarts = attempt - job.returns;  // restarts after failures so far
  const bool restarts_left =
      interrupt == 0 && outcome.exit_code != 0 && restarts < job.settings.max_restarts;
  if (restarts_left && job.options.restart_health_check) {
    const std::vector<std::string> unfit_nodes =
        NodesOfAttemptFoundUnfit(job, this_attempt, checked_s);
    // Every rank failed alike early on, as a script error does. But where a node of the attempt
    // is now found unfit (a drive or GPU that failed in the first seconds ends every rank alike,
    // the others in their collective), another attempt without it would not repeat the failure.
    if (verdict.deterministic && !unfit_nodes.empty()) {
      verdict.deterministic = false;
      this_attempt.blamed_node = unfit_nodes.front();
      this_attempt.detail +=
          fmt::format(", and {} {} failed the health check before the restart",
                      unfit_nodes.size() == 1 ? "node" : "nodes", fmt::join(unfit_nodes, ", "));
    }
  }
  const bool may_restart = restarts_left && !verdict.deterministic;
  if (outcome.exit_code == 0 && interrupt == 0) {
    record.status = "succeeded";
  } else if (interrupt != 0) {
    record.status = "interrupted";
    if (outcome.failed_rank < 0) record.exit_code = 128 + interrupt;
    std::fprintf(stderr, "dtrain: job %s interrupted by %s; every rank stopped\n",
                 record.name.c_str(), SignalName(interrupt).c_str());
  } else if (may_restart && JobSupervisor::InterruptSignal() != 0) {
    EndInterruptedBeforeRestart(record);  // the check before the restart cut short
  } else if (verdict.deterministic && restarts < job.settings.max_restarts) {
    record.status = "failed";
    std::fprintf(stderr,
                 "dtrain: job %s not restarted: %s, which another attempt would only repeat\n",
                 record.name.c_str(), verdict.detail.c_str());
  } else if (restarts < job.settings.max_restarts && (next_nodes = job.pool.Pick()).empty() &&
             (next_nodes = WaitForReturningNodes(job, waited_s)).empty()) {
    // Short of nodes, and none came back within the join timeout (or none may).
    if (JobSupervisor::InterruptSignal() != 0) {
      record.status = "interrupted";
      record.exit_code = 128 + JobSupervisor::InterruptSignal();
      std::fprintf(stderr, "dtrain: job %s interrupted while it waited for nodes\n",
                   record.name.c_str());
    } else {
      record.status = "failed";
      std::fprintf(stderr, "dtrain: job %s cannot restart: %s%s\n", record.name.c_str(),
                   job.pool.why_not().c_str(),
                   waited_s > 0
                       ? fmt::format(", and no node came back within {:g} s ({})",
                                     job.settings.join_timeout_s, job.settings.join_timeout_named)
                             .c_str()
                       : "");
    }
  } else if (restarts < job.settings.max_restarts) {
    // torchrun's last call: on fewer than --nnodes MAX, wait a while for a node that may return.
    double last_call_s = 0;
    next_nodes = WaitLastCall(job, next_nodes, "restarts", last_call_s);
    const double backoff = BackoffSeconds(restarts + 1);
    const double wait_s = std::max(0.0, backoff - checked_s - waited_s - last_call_s);
    if (JobSupervisor::InterruptSignal() == 0) {
      const std::string nodes = NodeList(job, next_nodes);
      std::fprintf(stderr,
                   "dtrain: restarting job %s (restart %d of %d) in %g s on %s; cause: %s\n",
                   record.name.c_str(), restarts + 1, job.settings.max_restarts, backoff,
                   nodes.c_str(), verdict.cause.c_str());
      WriteJobRecord(job.folder.job_dir, record);
      if (WaitBeforeRestart(wait_s)) return true;
    }
    EndInterruptedBeforeRestart(record);
  } else {
    record.status = "failed";
    if (job.settings.max_restarts > 0) {
      std::fprintf(stderr, "dtrain: job %s failed: all %d restart(s) used\n", record.name.c_str(),
                   job.settings.max_restarts);
    }
  }
  record.ended_us = WallMicros();
  WriteJobRecord(job.folder.job_dir, record);
  return false;
}

}  // namespace dtrain
