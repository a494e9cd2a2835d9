// A sweep over each rank's events in time order: between two events the rank is in the state the
// open spans describe, and that interval is added to the matching category.
#include "launcher/timeline/timeline_summary.h"
#include "runtime/trace/trace_vocabulary.h"

#include <algorithm>

#include <fmt/format.h>

namespace dtrain {
namespace {

bool StartsWith(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

double Ms(int64_t us) {
  return static_cast<double>(us) / 1000.0;
}

double Percent(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

int64_t Median(std::vector<int64_t> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

int64_t MeanStep(const RankTime& rank) {
  if (rank.step_us.empty()) return 0;
  int64_t sum = 0;
  for (int64_t s : rank.step_us) sum += s;
  return sum / static_cast<int64_t>(rank.step_us.size());
}

std::string Bytes(int64_t bytes) {
  if (bytes >= (1 << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
  if (bytes >= (1 << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / (1 << 10));
  return fmt::format("{} B", bytes);
}

}  // namespace

SpanKind ClassifySpan(const std::string& track, const std::string& name) {
  if (name == trace::kQueue || StartsWith(name, trace::kWaitPrefix) ||
      StartsWith(name, trace::kNegotiatePrefix)) {
    return SpanKind::kWait;
  }
  if (name == trace::kData || name == trace::kForward || name == trace::kBackward ||
      name == trace::kOptimizer || name == trace::kGraphStep || track == trace::kComputeTrack) {
    return SpanKind::kCompute;
  }
  return SpanKind::kComm;
}

void TimelineSummaryBuilder::Advance(RankState& state, int64_t ts) {
  if (!state.started) {
    state.started = true;
    state.first_us = state.last_us = ts;
    return;
  }
  if (ts <= state.last_us) return;
  int64_t dt = ts - state.last_us;
  RankTime& t = state.time;
  const int* n = state.counts;
  if (n[static_cast<int>(SpanKind::kCompute)] > 0) {
    t.compute_us += dt;
  } else if (n[static_cast<int>(SpanKind::kComm)] > 0) {
    t.comm_exposed_us += dt;
  } else if (n[static_cast<int>(SpanKind::kWait)] > 0) {
    t.wait_us += dt;
  } else {
    t.idle_us += dt;
  }
  if (n[static_cast<int>(SpanKind::kComm)] > 0) t.comm_us += dt;
  state.last_us = ts;
}

void TimelineSummaryBuilder::Begin(RankState& state, const MergedEvent& event) {
  OpenStack& open = state.open[event.tid];
  if (open.spans.size() >= OpenStack::kMaxOpenSpans) {
    ++open.overflow;
    return;
  }
  std::vector<OpenSpan>& stack = open.spans;
  OpenSpan span;
  span.kind = ClassifySpan(event.track, event.name);
  span.start_us = event.ts_us;
  const bool inside_fused = open.fused_open > 0;
  auto bytes = event.args.find(trace::kArgBytes);
  if (!inside_fused && event.name.find(trace::kAllreduce) != std::string::npos &&
      bytes != event.args.end() && bytes->is_number_integer()) {
    span.bytes = bytes->get<int64_t>();
    auto tensors = event.args.find(trace::kArgTensors);
    if (tensors != event.args.end() && tensors->is_number_integer()) span.tensors = *tensors;
    auto dtype = event.args.find(trace::kArgDtype);
    if (dtype != event.args.end() && dtype->is_string()) span.dtype = *dtype;
  }
  if (span.kind == SpanKind::kCompute && state.time.step_us.empty() && state.step_begin_us < 0) {
    state.step_begin_us = event.ts_us;
  }
  if (!stack.empty()) --state.counts[static_cast<int>(stack.back().kind)];
  ++state.counts[static_cast<int>(span.kind)];
  if (span.bytes >= 0) ++open.fused_open;
  stack.push_back(std::move(span));
}

void TimelineSummaryBuilder::End(RankState& state, const MergedEvent& event) {
  OpenStack& open = state.open[event.tid];
  if (open.overflow > 0) {
    --open.overflow;
    return;
  }
  std::vector<OpenSpan>& stack = open.spans;
  if (stack.empty()) return;
  OpenSpan span = std::move(stack.back());
  stack.pop_back();
  if (span.bytes >= 0) --open.fused_open;
  --state.counts[static_cast<int>(span.kind)];
  if (!stack.empty()) ++state.counts[static_cast<int>(stack.back().kind)];
  const bool step_end = event.name == trace::kOptimizer || event.name == trace::kGraphStep;
  if (step_end && state.step_begin_us >= 0) {
    state.time.step_us.push_back(event.ts_us - state.step_begin_us);
    state.step_begin_us = event.ts_us;
  }
  if (span.bytes >= 0) {
    FusedAllreduce& f = fused_[{event.track, event.name, span.bytes}];
    int64_t dur = event.ts_us - span.start_us;
    if (f.count == 0 || dur > f.max_us) {
      f.max_us = dur;
      f.max_rank = event.rank;
    }
    f.track = event.track;
    f.name = event.name;
    f.bytes = span.bytes;
    f.tensors = span.tensors;
    f.dtype = span.dtype;
    ++f.count;
    f.total_us += dur;
  }
}

void TimelineSummaryBuilder::Add(const MergedEvent& event) {
  // dtrain-clip's --gpu-timed-spans: the device's copy of the compute track's phases, written a
  // step or more late, out of time order; the host's spans already place the step.
  if (event.track == trace::kGpuTrack) return;
  RankState& state = ranks_[event.rank];
  Advance(state, event.ts_us);
  if (event.phase == 'B') {
    Begin(state, event);
  } else if (event.phase == 'E') {
    End(state, event);
  } else if (event.phase == 'X' && event.dur_us > 0) {
    Advance(state, event.ts_us + event.dur_us);
  }
}

TimelineSummary TimelineSummaryBuilder::Finish(const std::vector<RankTraceInfo>& ranks) {
  TimelineSummary summary;
  for (const RankTraceInfo& info : ranks) {
    RankState& state = ranks_[info.rank];
    state.time.rank = info.rank;
    state.time.host = info.host;
    state.time.wall_us = state.last_us - state.first_us;
    summary.ranks.push_back(state.time);
  }
  for (auto& [key, fused] : fused_) summary.largest.push_back(fused);
  std::sort(summary.largest.begin(), summary.largest.end(),
            [](const FusedAllreduce& a, const FusedAllreduce& b) {
              return a.bytes != b.bytes ? a.bytes > b.bytes : a.max_us > b.max_us;
            });
  if (summary.largest.size() > TimelineSummary::kLargestKept) {
    summary.largest.resize(TimelineSummary::kLargestKept);
  }
  return summary;
}

namespace {

std::string RankLabel(const RankTime& r) {
  return r.host.empty() ? fmt::format("rank {}", r.rank)
                        : fmt::format("rank {} ({})", r.rank, r.host);
}

void FormatRankTable(std::string& out, const TimelineSummary& summary) {
  out += fmt::format("{:>5} {:<16} {:>6} {:>9} {:>17} {:>17} {:>17} {:>10}\n", "rank", "host",
                     "steps", "step ms", "compute ms", "comm exposed ms", "waiting ms", "comm ms");
  for (const RankTime& r : summary.ranks) {
    out += fmt::format(
        "{:>5} {:<16} {:>6} {:>9.2f} {:>9.1f} ({:>4.1f}%) {:>9.1f} ({:>4.1f}%) "
        "{:>9.1f} ({:>4.1f}%) {:>10.1f}\n",
        r.rank, r.host.empty() ? "-" : r.host, r.step_us.size(), Ms(MeanStep(r)), Ms(r.compute_us),
        Percent(r.compute_us, r.wall_us), Ms(r.comm_exposed_us),
        Percent(r.comm_exposed_us, r.wall_us), Ms(r.wait_us), Percent(r.wait_us, r.wall_us),
        Ms(r.comm_us));
  }
}

// The ranks the others wait for: most compute per step (or in all, without steps).
void FormatSlowest(std::string& out, const TimelineSummary& summary) {
  if (summary.ranks.size() < 2) return;
  bool per_step = std::all_of(summary.ranks.begin(), summary.ranks.end(),
                              [](const RankTime& r) { return !r.step_us.empty(); });
  auto load = [per_step](const RankTime& r) {
    return per_step ? r.compute_us / static_cast<int64_t>(r.step_us.size()) : r.compute_us;
  };
  std::vector<int64_t> loads;
  for (const RankTime& r : summary.ranks) loads.push_back(load(r));
  int64_t median = Median(loads);
  std::vector<const RankTime*> order;
  for (const RankTime& r : summary.ranks) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(),
                   [&](const RankTime* a, const RankTime* b) { return load(*a) > load(*b); });
  out += fmt::format("\nslowest ranks (compute {} against the median rank's {:.2f} ms):\n",
                     per_step ? "per step" : "in all", Ms(median));
  for (size_t i = 0; i < std::min<size_t>(3, order.size()); ++i) {
    int64_t l = load(*order[i]);
    out += fmt::format("  {}: {:.2f} ms, {:+.2f} ms ({:+.1f}%), waiting {:.1f} ms in all\n",
                       RankLabel(*order[i]), Ms(l), Ms(l - median), Percent(l - median, median),
                       Ms(order[i]->wait_us));
  }
}

void FormatOverlap(std::string& out, const TimelineSummary& summary) {
  int64_t comm = 0;
  int64_t exposed = 0;
  for (const RankTime& r : summary.ranks) {
    comm += r.comm_us;
    exposed += r.comm_exposed_us;
  }
  out += fmt::format(
      "\ncommunication: {:.1f} ms over all ranks, {:.1f} ms ({:.1f}%) not overlapped with "
      "compute\n",
      Ms(comm), Ms(exposed), Percent(exposed, comm));
}

void FormatLargest(std::string& out, const TimelineSummary& summary) {
  if (summary.largest.empty()) {
    out += "\nno fused allreduces recorded (no *ALLREDUCE span with a \"bytes\" argument)\n";
    return;
  }
  out += "\nlargest fused allreduces:\n";
  for (const FusedAllreduce& f : summary.largest) {
    out += fmt::format(
        "  {:>10}  {:<20} {:<16} {:>4} tensors {:<8} x{:<6} mean {:.2f} ms, "
        "max {:.2f} ms (rank {})\n",
        Bytes(f.bytes), f.track, f.name, f.tensors, f.dtype.empty() ? "-" : f.dtype, f.count,
        Ms(f.total_us / std::max<int64_t>(1, f.count)), Ms(f.max_us), f.max_rank);
  }
}

}  // namespace

std::string FormatTimelineSummary(const TimelineSummary& summary) {
  std::string out;
  FormatRankTable(out, summary);
  FormatSlowest(out, summary);
  FormatOverlap(out, summary);
  FormatLargest(out, summary);
  return out;
}

}  // namespace dtrain
