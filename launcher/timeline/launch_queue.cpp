// Follows HTA 0.5.0: TraceCounters._get_queue_length_time_series_for_rank,
// get_queue_length_summary_from_time_series and get_time_spent_blocked_on_full_queue
// (hta/analyzers/trace_counters.py). HTA keeps one stream's blocked time per rank; here every
// stream has its own.
#include "launcher/timeline/launch_queue.h"

#include <algorithm>

#include <fmt/format.h>

#include "launcher/timeline/summary_numbers.h"

namespace dtrain {
namespace {

// A change of a stream's queue: +1 when a launch call starts, -1 when its activity starts.
struct QueueStep {
  int64_t stream;
  double ts;
  int delta;
};

}  // namespace

std::vector<StreamQueue> LaunchQueueByStream(const std::vector<LaunchedActivity>& activities,
                                             int full_length) {
  std::vector<QueueStep> steps;
  for (const LaunchedActivity& a : activities) {
    if (a.call == LaunchCallKind::kNone) continue;
    steps.push_back({a.stream, a.call_start, +1});
    steps.push_back({a.stream, a.start, -1});
  }
  // By stream, then time; at the same time a launch before a start (HTA lists the calls before
  // the activities and sorts by time alone, with numpy's unstable sort: its order there varies).
  std::stable_sort(steps.begin(), steps.end(), [](const QueueStep& a, const QueueStep& b) {
    if (a.stream != b.stream) return a.stream < b.stream;
    if (a.ts != b.ts) return a.ts < b.ts;
    return a.delta > b.delta;
  });
  std::vector<StreamQueue> out;
  int64_t length = 0;
  double sum = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const QueueStep& s = steps[i];
    if (i == 0 || steps[i - 1].stream != s.stream) {
      out.push_back(StreamQueue{s.stream});
      length = 0;
      sum = 0;
    }
    StreamQueue& q = out.back();
    length += s.delta;
    q.points += 1;
    sum += static_cast<double>(length);
    q.mean = sum / static_cast<double>(q.points);
    q.max = std::max(q.max, length);
    // The length holds until the stream's next point; after its last one nothing is counted.
    const bool last = i + 1 == steps.size() || steps[i + 1].stream != s.stream;
    if (!last && length >= full_length) q.full_us += steps[i + 1].ts - s.ts;
  }
  return out;
}

std::string FormatLaunchQueues(const std::map<int, std::vector<StreamQueue>>& by_rank) {
  std::string out =
      "Launch queue per stream (as HTA's queue length: launches the CPU made that the GPU had not "
      "started yet)\n";
  out +=
      fmt::format("{:>5} {:>7} {:>9} {:>11} {:>10} {:>15}\n", "rank", "stream", "launches",
                  "mean queue", "max queue", fmt::format("full ({}) ms", kCudaLaunchQueueLength));
  std::vector<std::string> full;
  bool any = false;
  for (const auto& [rank, queues] : by_rank) {
    const std::vector<const StreamQueue*> listed =
        ListedShares(queues, [](const StreamQueue& q) { return q.points; });
    for (const StreamQueue* q : listed) {
      any = true;
      out += fmt::format("{:>5} {:>7} {:>9} {:>11.1f} {:>10} {:>15.3f}\n", rank, q->stream,
                         q->points / 2, q->mean, q->max, q->full_us / 1000.0);
    }
    if (queues.size() > listed.size()) {
      out += fmt::format("{:>5} (and {} stream(s) with fewer launches; all in --json)\n", rank,
                         queues.size() - listed.size());
    }
    for (const StreamQueue& q : queues) {
      if (q.full_us > 0) {
        full.push_back(
            fmt::format("rank {} stream {} ({:.3f} ms)", rank, q.stream, q.full_us / 1000));
      }
    }
  }
  if (!any) return "";
  if (!full.empty()) {
    std::string where;
    for (size_t i = 0; i < full.size(); ++i) where += (i == 0 ? "" : ", ") + full[i];
    out += fmt::format(
        "The launch queue was full on {}: the CPU waited for the GPU there, which is the GPU "
        "setting the pace, as it should.\n",
        where);
  }
  return out;
}

nlohmann::json LaunchQueueJson(const std::vector<StreamQueue>& queues) {
  nlohmann::json out = nlohmann::json::array();
  for (const StreamQueue& q : queues) {
    out.push_back({{"stream", q.stream},
                   {"launches", q.points / 2},
                   {"mean", Round3(q.mean)},
                   {"max", q.max},
                   {"full_ms", Round3(q.full_us / 1000.0)}});
  }
  return out;
}

}  // namespace dtrain
