// The verdict reads the outcome in order: interrupt, success, unfit node (the health watch),
// lost node, stall, then the first failing rank's own end.
#include "launcher/restart_policy.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <fmt/format.h>

#include "launcher/oom_kill.h"

namespace dtrain {
namespace {

// Every rank ended by itself with the same non-zero exit code, all soon after the start.
bool SameErrorEverywhere(const RankPlan& plan, const JobOutcome& outcome, int64_t started_us) {
  // One rank alone says nothing about the others: its early error is retried.
  if (outcome.statuses.size() != plan.ranks.size() || plan.ranks.size() < 2) return false;
  const ExitStatus& first = outcome.statuses.begin()->second;
  for (const auto& [rank, status] : outcome.statuses) {
    if (!status.error.empty() || status.signal != 0 || status.code == 0 ||
        status.code != first.code) {
      return false;
    }
    auto ended = outcome.ended_us.find(rank);
    if (ended == outcome.ended_us.end() || ended->second - started_us > kEarlyFailureS * 1e6)
      return false;
  }
  return true;
}

}  // namespace

std::string StoreFailure(const RankPlan& plan, const std::string& why) {
  return "the job's TCPStore on node " +
         (plan.ranks.empty() ? std::string("?") : plan.ranks.front().host) + " failed: " + why;
}

AttemptVerdict JudgeAttempt(const RankPlan& plan, const JobOutcome& outcome, int64_t started_us,
                            int interrupt) {
  AttemptVerdict v;
  if (interrupt != 0) {
    v.cause = "interrupted";
    v.detail = "interrupted by " + SignalName(interrupt);
    return v;
  }
  if (outcome.exit_code == 0) return v;
  if (outcome.unfit) {  // the health watch stopped the job: the node is unfit, quarantined at once
    v.cause = outcome.unfit->straggler ? "straggler" : "unhealthy";
    // A pair named alike (two nodes that cannot connect) blames neither; the check before the
    // restart tells which.
    if (outcome.unfit->alike.empty()) v.blamed_host = outcome.unfit->host;
    v.detail = outcome.unfit->why;
    return v;
  }
  if (!outcome.store_failure.empty()) {  // the ranks' store ended under them: no node blamed
    v.cause = "store";
    v.detail = StoreFailure(plan, outcome.store_failure);
    return v;
  }
  const RankSlot* slot = nullptr;
  if (outcome.failed_rank >= 0 && outcome.failed_rank < static_cast<int>(plan.ranks.size()))
    slot = &plan.ranks[outcome.failed_rank];
  if (slot) v.blamed_host = slot->host;
  // A lost node ends every rank on it with the same error; any of them names it.
  for (const auto& [rank, status] : outcome.statuses) {
    if (!status.lost && status.error.empty()) continue;
    if (status.not_found) continue;
    if (rank == outcome.failed_rank || !slot) {
      v.cause = "node-lost";
      v.node_lost = true;
      v.blamed_host = plan.ranks.at(rank).host;
      v.detail = status.error;
      return v;
    }
  }
  if (outcome.stall) {
    v.cause = "stall";
    v.detail = outcome.stall->summary;
    return v;
  }
  if (!slot) {
    v.cause = "error";
    v.detail = fmt::format("exit {}", outcome.exit_code);
    return v;
  }
  const ExitStatus& status = outcome.statuses.at(outcome.failed_rank);
  v.cause = status.signal != 0 ? "signal" : "error";
  v.detail = fmt::format("rank {} on node {}: {}", slot->rank, slot->host, status.Describe());
  if (v.cause == "error" && SameErrorEverywhere(plan, outcome, started_us)) {
    v.deterministic = true;
    v.blamed_host.clear();  // no node's fault
    v.detail = fmt::format("every rank exited with {} within {:g} s of the start", status.code,
                           kEarlyFailureS);
  }
  return v;
}

bool SaysCollectiveTimedOut(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto has = [&lower](const char* needle) { return lower.find(needle) != std::string::npos; };
  if (has("collective operation timeout")) return true;  // NCCL's watchdog
  if (has("timed out waiting") && (has("for recv operation") || has("for send operation")))
    return true;  // Gloo's pairs
  if (has("distbackenderror") && (has("timed out") || has("timeout"))) return true;
  return has("collective") && (has("timed out") || has("timeout after"));
}

void MarkCollectiveTimeout(const RankPlan& plan, AttemptVerdict& verdict, const std::string& text) {
  if (verdict.cause != "error" && verdict.cause != "signal") return;
  if (verdict.deterministic || !SaysCollectiveTimedOut(text)) return;
  verdict.cause = "collective-timeout";
  verdict.blamed_host.clear();
  const std::string missing = " has not entered it";  // runtime/dist/heartbeat.cpp
  const size_t at = text.find(missing);
  const size_t word = at == std::string::npos ? at : text.rfind("rank ", at);
  if (word == std::string::npos) return;
  const int rank = std::atoi(text.c_str() + word + 5);
  for (const RankSlot& slot : plan.ranks) {
    if (slot.rank == rank) verdict.blamed_host = slot.host;
  }
  if (!verdict.blamed_host.empty())
    verdict.detail +=
        fmt::format("; rank {} on node {} never entered the collective", rank, verdict.blamed_host);
}

void MarkOutOfMemory(const ExitStatus& status, AttemptVerdict& verdict, const std::string& text) {
  if (verdict.cause != "error" && verdict.cause != "signal") return;
  if (!KilledByOomKiller(status, text)) return;
  verdict.cause = "oom";
  verdict.blamed_host.clear();
  verdict.detail += "; the kernel's OOM killer ended it (out of host memory)";
}

void MarkWatchdogTimer(AttemptVerdict& verdict, const std::string& text) {
  if (verdict.cause != "error" && verdict.cause != "signal") return;
  const std::string said = "TimerExpired: the watchdog timer ";
  const size_t at = text.find(said);
  if (at == std::string::npos) return;
  verdict.cause = "watchdog-timer";
  const size_t from = at + said.size();
  const size_t to = text.find(" (torch.distributed.elastic.timer)", from);
  const size_t after = text.find(" expired ", from);
  const size_t set = text.find(" after it was set", after == std::string::npos ? from : after);
  std::string what = "its watchdog timer";
  if (to != std::string::npos && to - from < 200) what += " " + text.substr(from, to - from);
  what += " expired";
  if (after != std::string::npos && set != std::string::npos && set - after < 40)
    what += " " + text.substr(after + 9, set - after - 9) + " after it was set";
  verdict.detail += "; " + what;
}

double BackoffSeconds(int restart) {
  double s = 1;
  for (int i = 1; i < restart && s < kMaxBackoffS; ++i) s *= 2;
  return std::min(s, kMaxBackoffS);
}

}  // namespace dtrain
