// Where each rank's time went, from the merged events: compute, communication, waiting, steps,
// stragglers, and the largest fused allreduces. Built event by event (memory grows with steps
// and threads, not with the trace), so it runs during the streaming merge.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "launcher/timeline/timeline_merge.h"

namespace dtrain {

// One rank's time, split so that compute + comm_exposed + wait + idle = wall: at each moment the
// rank counts as computing if any compute span is open, else communicating if any collective
// activity is, else waiting (QUEUE, WAIT_FOR_DATA, NEGOTIATE_*), else idle.
struct RankTime {
  int rank = 0;
  std::string host;
  int64_t wall_us = 0;          // first to last event
  int64_t compute_us = 0;       // DATA, FORWARD, BACKWARD, OPTIMIZER (and the compute track)
  int64_t comm_us = 0;          // any collective activity open, overlapped or not
  int64_t comm_exposed_us = 0;  // collective activity while no compute span is open
  int64_t wait_us = 0;
  int64_t idle_us = 0;
  std::vector<int64_t> step_us;  // between consecutive OPTIMIZER ends (the first from the start)
};

// A fused allreduce: spans named *ALLREDUCE whose args carry "bytes", grouped by track, name
// and size over every rank and step (each step repeats the same fusion buffers).
struct FusedAllreduce {
  std::string track;
  std::string name;
  int64_t bytes = 0;
  int64_t tensors = 0;
  std::string dtype;
  int64_t count = 0;
  int64_t total_us = 0;
  int64_t max_us = 0;
  int max_rank = 0;  // the rank where it took longest
};

struct TimelineSummary {
  std::vector<RankTime> ranks;          // by rank
  std::vector<FusedAllreduce> largest;  // biggest first, at most kLargestKept
  static constexpr size_t kLargestKept = 5;
};

// Which of the summary's categories a span named `name` on track `track` belongs to.
enum class SpanKind { kCompute, kComm, kWait };
SpanKind ClassifySpan(const std::string& track, const std::string& name);

// Feed every merged event of a rank in that rank's order (ranks one after another).
class TimelineSummaryBuilder {
 public:
  void Add(const MergedEvent& event);
  // Names and hosts come from the merge result.
  TimelineSummary Finish(const std::vector<RankTraceInfo>& ranks);

 private:
  // One open span on a thread; bytes >= 0 marks one counted as a fused allreduce.
  struct OpenSpan {
    SpanKind kind = SpanKind::kCompute;
    int64_t start_us = 0;
    int64_t bytes = -1;
    int64_t tensors = 0;
    std::string dtype;
  };
  // The spans open on one thread, innermost last. Nesting deeper than kMaxOpenSpans is not a
  // real trace (a writer that never closes its spans): the excess is only counted, so memory
  // and time stay bounded.
  struct OpenStack {
    static constexpr size_t kMaxOpenSpans = 4096;
    std::vector<OpenSpan> spans;
    int fused_open = 0;     // spans in `spans` counted as fused allreduces
    uint64_t overflow = 0;  // 'B' records past kMaxOpenSpans not yet closed
  };
  // The sweep over one rank's events.
  struct RankState {
    RankTime time;
    std::map<int, OpenStack> open;  // by thread
    int counts[3] = {0, 0, 0};      // threads whose innermost span is of each kind
    bool started = false;
    int64_t first_us = 0;
    int64_t last_us = 0;
    int64_t step_begin_us = -1;
  };

  void Advance(RankState& state, int64_t ts);
  void Begin(RankState& state, const MergedEvent& event);
  void End(RankState& state, const MergedEvent& event);

  std::map<int, RankState> ranks_;
  std::map<std::tuple<std::string, std::string, int64_t>, FusedAllreduce> fused_;
};

// The report `dtrain timeline --summary` prints.
std::string FormatTimelineSummary(const TimelineSummary& summary);

}  // namespace dtrain
