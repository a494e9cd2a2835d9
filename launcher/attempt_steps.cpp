#include "launcher/attempt_steps.h"

#include <fstream>

#include "launcher/step_watch.h"

namespace dtrain {

int FillAttemptSteps(std::vector<JobAttempt>& attempts, const std::string& host,
                     const std::string& metrics_path, int64_t clock_offset_us) {
  std::vector<JobAttempt*> open;
  for (JobAttempt& a : attempts) {
    if (a.first_step < 0 && !a.nodes.empty() && a.nodes.front() == host && a.ended_us > 0)
      open.push_back(&a);
  }
  std::ifstream in(metrics_path);
  if (open.empty() || !in) return 0;
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

void PlaceFetchedSteps(JobRecord& record, const std::string& job_dir) {
  if (record.attempts.size() < 2 || record.plan.ranks.empty()) return;
  const std::string& host = record.plan.ranks.front().host;
  auto clock = record.node_clocks.find(host);
  const int64_t offset = clock == record.node_clocks.end() ? 0 : clock->second.offset_us;
  if (FillAttemptSteps(record.attempts, host, job_dir + "/metrics/rank-0.jsonl", offset) > 0)
    WriteJobRecord(job_dir, record);
}

}  // namespace dtrain
