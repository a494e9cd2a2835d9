#include "launcher/attempt_steps.h"

#include <optional>
#include <sstream>

#include "launcher/open_to_read.h"
#include "launcher/step_watch.h"

namespace dtrain {

namespace {

// Fills the steps of the attempts in `open` from the lines of `metrics_path`; how many it filled.
int FillSteps(const std::vector<JobAttempt*>& open, const std::string& metrics_path,
              int64_t clock_offset_us) {
  if (open.empty()) return 0;
  // Without updating the file's access time: that would wait for a drive that hangs.
  const std::optional<std::string> text = ReadToEnd(metrics_path);
  if (!text) return 0;
  std::istringstream in(*text);
  // A line written just before its rank was stopped may reach the file after the attempt's end
  // was recorded: a little slack, far shorter than any restart's backoff.
  constexpr int64_t kSlackUs = 500000;
  int filled = 0;
  for (std::string line; std::getline(in, line);) {
    const MetricsStep m = ReadMetricsStep(line);
    if (m.step < 0 || m.time_us < 0) continue;  // a line without a time cannot be placed
    const int64_t step = m.step;
    const int64_t at_us = m.time_us + clock_offset_us;
    for (JobAttempt* a : open) {
      if (at_us < a->started_us || at_us > a->ended_us + kSlackUs) continue;
      if (a->first_step < 0) {
        a->first_step = step;
        a->first_step_us = at_us;
        ++filled;
      }
      a->last_step = step;
      break;
    }
  }
  return filled;
}

bool StepsUnknown(const JobAttempt& a) {
  return a.first_step < 0 && !a.nodes.empty() && a.ended_us > 0;
}

int64_t ClockOffset(const JobRecord& record, const std::string& host) {
  auto clock = record.node_clocks.find(host);
  return clock == record.node_clocks.end() ? 0 : clock->second.offset_us;
}

}  // namespace

int FillAttemptSteps(std::vector<JobAttempt>& attempts, const std::string& host,
                     const std::string& metrics_path, int64_t clock_offset_us) {
  std::vector<JobAttempt*> open;
  for (JobAttempt& a : attempts) {
    if (StepsUnknown(a) && a.nodes.front() == host) open.push_back(&a);
  }
  return FillSteps(open, metrics_path, clock_offset_us);
}

bool StepsFromAnotherNode(const JobAttempt& attempt, const std::map<int, std::string>& rank_hosts) {
  const auto rank_zero = rank_hosts.find(0);
  return StepsUnknown(attempt) && rank_zero != rank_hosts.end() &&
         attempt.nodes.front() != rank_zero->second;
}

AttemptStepSource StepSourceOf(const JobAttempt& attempt,
                               const std::map<int, std::string>& rank_hosts,
                               const std::set<std::string>& lost) {
  std::map<std::string, int> per_host;  // ranks each node of the last plan ran
  for (const auto& [rank, host] : rank_hosts) ++per_host[host];
  int uniform = per_host.empty() ? 0 : per_host.begin()->second;
  for (const auto& [host, count] : per_host) {
    if (count != uniform) uniform = 0;
  }
  int first = 0;  // the first rank of the node at hand
  for (const std::string& host : attempt.nodes) {
    auto it = per_host.find(host);
    const int count = it != per_host.end() ? it->second : uniform;
    if (count <= 0) return {};  // how many ranks it ran is not known, nor the next's first
    if (!lost.count(host)) return {host, first};
    first += count;
  }
  return {};
}

std::string EarlierMetricsPath(const std::string& job_dir, int attempt, int rank) {
  return job_dir + "/metrics/attempt-" + std::to_string(attempt) + "/rank-" + std::to_string(rank) +
         ".jsonl";
}

void PlaceFetchedSteps(JobRecord& record, const std::string& job_dir,
                       const std::set<std::string>& lost) {
  if (record.attempts.size() < 2 || record.plan.ranks.empty()) return;
  const std::string& host = record.plan.ranks.front().host;
  int filled = FillAttemptSteps(record.attempts, host, job_dir + "/metrics/rank-0.jsonl",
                                ClockOffset(record, host));
  std::map<int, std::string> rank_hosts;
  for (const RankSlot& s : record.plan.ranks) rank_hosts[s.rank] = s.host;
  for (JobAttempt& a : record.attempts) {
    if (!StepsFromAnotherNode(a, rank_hosts)) continue;
    const AttemptStepSource source = StepSourceOf(a, rank_hosts, lost);
    if (source.host.empty()) continue;
    filled += FillSteps({&a}, EarlierMetricsPath(job_dir, a.restart_count + 1, source.rank),
                        ClockOffset(record, source.host));
  }
  if (filled > 0) WriteJobRecord(job_dir, record);
}

}  // namespace dtrain
