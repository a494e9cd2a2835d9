// The end-of-job fetch of metrics and traces (job_results_fetch.h).
#include "launcher/job_results_fetch.h"

#include <cstdio>

#include "launcher/attempt_steps.h"
#include "launcher/error.h"
#include "launcher/log_reader.h"
#include "launcher/timeline/trace_fetch.h"

namespace dtrain {

void FetchNodeResults(const std::string& job_dir, const ClusterSpec& spec,
                      const std::set<std::string>& lost) {
  auto warn = [](const TraceFetchReport& report) {
    for (const std::string& w : report.warnings)
      std::fprintf(stderr, "dtrain: warning: %s\n", w.c_str());
  };
  try {
    JobSummary job = ReadJobSummary(job_dir);
    const std::map<int, std::string> rank_hosts = job.rank_hosts;
    for (auto it = job.rank_hosts.begin(); it != job.rank_hosts.end();) {
      if (!lost.count(it->second)) {
        ++it;
        continue;
      }
      job.rank_metrics.erase(it->first);
      job.rank_traces.erase(it->first);
      it = job.rank_hosts.erase(it);
    }
    for (const std::string& host : lost) {
      std::fprintf(stderr,
                   "dtrain: node %s was lost: its metrics and traces were not fetched (later: "
                   "dtrain timeline --job %s, once it answers)\n",
                   host.c_str(), job.name.c_str());
    }
    const TraceFetchReport fetched = FetchRemoteMetrics(job_dir, job, spec.source, &spec.ssh);
    if (!fetched.fetched.empty()) {
      std::fprintf(stderr,
                   "dtrain: metrics of %zu rank(s) fetched from their nodes into %s/metrics\n",
                   fetched.fetched.size(), job_dir.c_str());
    }
    warn(fetched);
    // An attempt whose rank 0 ran on another node than the last plan's rank 0: its steps from
    // that node's rank 0, or where that node was lost from another of its nodes' first rank
    // (attempt_steps.h). The last plan's ranks, lost nodes' included, say how many a node ran.
    for (const JobAttempt& a : job.attempts) {
      if (!StepsFromAnotherNode(a, rank_hosts)) continue;
      const AttemptStepSource source = StepSourceOf(a, rank_hosts, lost);
      for (const NodeSpec& node : spec.nodes) {
        if (source.host.empty() || node.host != source.host) continue;
        warn(FetchEarlierRankMetrics(job_dir, job, spec.source, &spec.ssh, a.restart_count + 1,
                                     source.rank, node));
      }
    }
    std::set<std::string> skip = fetched.unreachable;
    skip.insert(lost.begin(), lost.end());
    const TraceFetchReport traces =
        FetchRemoteProfilerTraces(job_dir, job, spec.source, &spec.ssh, skip);
    if (!traces.fetched.empty()) {
      std::fprintf(stderr, "dtrain: %zu PyTorch profiler trace(s) fetched from the nodes\n",
                   traces.fetched.size());
    }
    warn(traces);
  } catch (const Error& e) {
    std::fprintf(stderr, "dtrain: warning: metrics or traces not fetched: %s\n", e.what());
  }
}

}  // namespace dtrain
