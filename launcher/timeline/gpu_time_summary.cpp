// The GPU-time split follows HTA 0.5.0's get_temporal_breakdown (hta/analyzers/
// breakdown_analysis.py): GPU activity launched during a rank's last profiler step is left out
// (a step the profiler cut), the span runs from the first activity's start to the last one's
// end, idle is the span less the union of all activity. One sweep over the activity edges gives
// every category at once.
#include "launcher/timeline/gpu_time_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "launcher/timeline/summary_numbers.h"

namespace dtrain {
namespace {

bool IsProfilerStep(std::string_view name) {
  return name.find("ProfilerStep") != std::string_view::npos;
}

// A stretch of time in which the GPU did the `kind` of work that counts first.
struct Segment {
  double start;
  double end;
  GpuActivityKind kind;
};

}  // namespace

GpuTimeSummaryBuilder::GpuTimeSummaryBuilder(std::string step_name, bool operators,
                                             int straggler_candidates)
    : step_name_(std::move(step_name)),
      operators_(operators),
      straggler_candidates_(straggler_candidates) {}

void GpuTimeSummaryBuilder::Add(const KinetoEvent& event) {
  RankState& state = ranks_[event.rank];
  const double end = event.ts_us + event.dur_us;
  if (IsGpuActivityCategory(event.cat) && event.stream >= 0) {
    if (event.bytes >= 0) state.copy_bytes.emplace(state.activities.size(), event.bytes);
    const GpuActivityKind kind = ClassifyGpuActivity(event.name);
    if (kind == GpuActivityKind::kMemory) {
      state.copy_gbps.emplace(state.activities.size(), std::max(0.0, event.memory_bw_gbps));
    }
    state.activities.push_back(Activity{event.ts_us, end, event.correlation, Intern(event.name),
                                        static_cast<int32_t>(event.stream), kind});
    return;
  }
  // A stream's synchronisation record ("Stream Wait Event", "Stream Sync") sits on the GPU
  // timeline, and HTA counts it among the GPU's activity: it bounds the span as HTA's does. Its
  // duration is the host's wait, not GPU work, so it adds no busy time (where HTA counts it).
  if (event.cat == "cuda_sync" && event.stream >= 0) {
    state.activities.push_back(Activity{event.ts_us, end, event.correlation, Intern(event.name),
                                        static_cast<int32_t>(event.stream), GpuActivityKind::kOther,
                                        true});
    return;
  }
  if (event.cat == "cpu_op" && event.name.rfind("aten::", 0) == 0) {
    aten_ops_.AddOp(event.rank, event.name, event.ts_us, end);
  }
  if (event.correlation >= 0 && IsHtaKernelLaunchCall(event.name)) {
    aten_ops_.AddLaunch(event.rank, event.correlation, event.ts_us, end);
  }
  if (event.correlation >= 0) {
    auto [it, added] = state.launches.emplace(event.correlation, Launch{event.ts_us});
    Launch& launch = it->second;
    if (!added) launch.earliest_us = std::min(launch.earliest_us, event.ts_us);
    const LaunchCallKind call = ClassifyLaunchCall(event.name);
    if (call != LaunchCallKind::kNone && launch.call == LaunchCallKind::kNone) {
      launch.call_start_us = event.ts_us;
      launch.call_duration_us = event.dur_us;
      launch.call = call;
    }
  }
  if (IsProfilerStep(event.name)) {
    state.profiler_step_names.insert(Intern(event.name));
    state.last_profiler_step_us = std::max(state.last_profiler_step_us, event.ts_us);
    if (event.cat == "user_annotation") {
      state.profiler_steps.push_back(Span{event.ts_us, end, Intern(event.name)});
    }
  }
  if (operators_ && event.cat == "cpu_op") {
    state.cpu_operators.push_back(Span{event.ts_us, end, Intern(event.name)});
  }
  if (event.cat == "user_annotation") {
    if (IsStepAnnotation(step_name_, event.name))
      state.steps.push_back(Span{event.ts_us, end, Intern(event.name)});
  }
  if (IsCollectiveAnnotation(event.cat, event.name)) {
    collective_starts_[event.rank].push_back({Intern(event.name), event.ts_us});
  }
}

RankGpuTime GpuTimeSummaryBuilder::Sweep(int rank, RankState& state, GpuIdleCauses& causes,
                                         std::vector<StreamQueue>& queues,
                                         std::vector<MemoryBandwidth>& bandwidth,
                                         RankOps* operators) {
  RankGpuTime out;
  out.rank = rank;
  std::sort(state.profiler_steps.begin(), state.profiler_steps.end(),
            [](const Span& a, const Span& b) { return a.start < b.start; });
  if (operators) *operators = CollectOperators(rank, state);
  // HTA keeps the GPU activity whose launch came before the last profiler step began, when the
  // trace has profiler steps at all (two or more). HTA counts the steps' names over every rank
  // it loaded; here each rank's own count (ranks are summed up one at a time): the same where
  // every rank recorded the same steps.
  const bool filter = state.profiler_step_names.size() >= 2;
  struct Edge {
    double ts;
    int delta;
    GpuActivityKind kind;
  };
  std::vector<Edge> edges;
  edges.reserve(state.activities.size() * 2);
  std::vector<LaunchedActivity> launched;
  launched.reserve(state.activities.size());
  // The profiler steps HTA keeps (all but the last, where it filters), by start, with their
  // numbers, and the step a GPU activity's launch lies in (HTA's iteration of the activity), for
  // the late GPUs.
  std::vector<Span> kept_steps;
  std::vector<int> step_numbers;
  for (const Span& step : state.profiler_steps) {
    const int number = ProfilerStepNumber(names_[step.name]);
    if (number < 0 || (filter && step.start >= state.last_profiler_step_us)) continue;
    kept_steps.push_back(step);
    step_numbers.push_back(number);
    late_gpus_.AddStep(number, step.start, step.end);
  }
  auto step_of = [&](double ts) {
    const Span* step = SpanAt(kept_steps, ts);
    return step ? step_numbers[step - kept_steps.data()] : -1;
  };
  RankWork& compute = compute_work_[rank];
  RankWork& to_gpu = to_gpu_work_[rank];
  RankWork& from_gpu = from_gpu_work_[rank];
  std::vector<MemoryCopy> copies;
  for (size_t i = 0; i < state.activities.size(); ++i) {
    const Activity& a = state.activities[i];
    auto launch = state.launches.find(a.correlation);
    const bool launched_known = launch != state.launches.end();
    if (filter && (!launched_known || launch->second.earliest_us >= state.last_profiler_step_us)) {
      continue;
    }
    if (a.marker) {
      edges.push_back({a.start, +1, a.kind});  // the span reaches its end; nothing open between
      edges.push_back({a.start, -1, a.kind});
      edges.push_back({a.end, +1, a.kind});
      edges.push_back({a.end, -1, a.kind});
      continue;
    }
    edges.push_back({a.start, +1, a.kind});
    edges.push_back({a.end, -1, a.kind});
    LaunchedActivity& l = launched.emplace_back();
    l.stream = a.stream;
    l.start = a.start;
    l.end = a.end;
    if (launched_known) {
      l.launched_at = launch->second.earliest_us;
      l.call = launch->second.call;
      l.call_start = launch->second.call_start_us;
      l.call_duration = launch->second.call_duration_us;
    }
    kernel_breakdown_.Add(rank, a.kind, names_[a.name], a.start, a.end);
    if (launched_known) {
      const Launch& by = launch->second;
      const int step =
          step_of(by.call != LaunchCallKind::kNone ? by.call_start_us : by.earliest_us);
      if (step >= 0) {
        late_gpus_.AddActivityEnd(a.end);
        if (a.kind == GpuActivityKind::kCommunication) {
          late_gpus_.AddKernel(rank, step, a.stream, names_[a.name], a.start, a.end);
        }
      }
    }
    KernelTotal& total = kernels_[a.name];
    total.kind = a.kind;
    total.count += 1;
    total.total_ms += (a.end - a.start) / 1000.0;
    total.max_us = std::max(total.max_us, a.end - a.start);
    ++out.activities;
    if (auto gbps = state.copy_gbps.find(i); gbps != state.copy_gbps.end()) {
      copies.push_back({MemoryKernelKind(names_[a.name]), a.start, a.end, gbps->second});
    }
    if (a.kind == GpuActivityKind::kCompute) {
      compute[names_[a.name]].durations_us.push_back(a.end - a.start);
    } else if (auto bytes = state.copy_bytes.find(i); bytes != state.copy_bytes.end()) {
      const std::string& name = names_[a.name];
      RankWork* way = name.rfind("Memcpy HtoD", 0) == 0   ? &to_gpu
                      : name.rfind("Memcpy DtoH", 0) == 0 ? &from_gpu
                                                          : nullptr;
      if (way) {
        SameWork& work = (*way)[fmt::format("{} {} bytes", name, bytes->second)];
        work.durations_us.push_back(a.end - a.start);
        work.bytes = bytes->second;
      }
    }
  }
  {
    // The ATen operators' launches matched with their kernels (the first activity of a
    // correlation id), by this rank's activities while they are here.
    std::unordered_map<int64_t, size_t> by_correlation;
    for (size_t i = 0; i < state.activities.size(); ++i) {
      if (!state.activities[i].marker) by_correlation.emplace(state.activities[i].correlation, i);
    }
    aten_ops_.EndRank(
        rank,
        [&](int64_t correlation, std::string_view* name, double* start) {
          auto it = by_correlation.find(correlation);
          if (it == by_correlation.end()) return false;
          *name = names_[state.activities[it->second].name];
          *start = state.activities[it->second].start;
          return true;
        },
        filter ? state.last_profiler_step_us : std::numeric_limits<double>::infinity());
  }
  std::vector<Activity>().swap(state.activities);
  kernel_breakdown_.EndRank(rank);
  queues = LaunchQueueByStream(launched);
  bandwidth = SummarizeMemoryBandwidth(copies);
  causes = FindGpuIdleCauses(std::move(launched));
  std::unordered_map<int64_t, Launch>().swap(state.launches);
  std::unordered_map<size_t, int64_t>().swap(state.copy_bytes);
  std::unordered_map<size_t, double>().swap(state.copy_gbps);
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.ts < b.ts; });
  std::vector<Segment> segments;
  int open[4] = {0, 0, 0, 0};
  double us[5] = {0, 0, 0, 0, 0};  // by kind, then idle
  double comm_total = 0, overlap = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    if (i > 0) {
      const double dt = edges[i].ts - edges[i - 1].ts;
      int layer = 4;
      for (int k = 0; k < 4; ++k) {
        if (open[k] > 0) {
          layer = k;
          break;
        }
      }
      us[layer] += dt;
      if (open[1] > 0) comm_total += dt;
      if (open[1] > 0 && open[0] > 0) overlap += dt;
      if (layer < 4 && dt > 0) {
        const auto kind = static_cast<GpuActivityKind>(layer);
        if (!segments.empty() && segments.back().kind == kind &&
            segments.back().end == edges[i - 1].ts) {
          segments.back().end = edges[i].ts;
        } else {
          segments.push_back({edges[i - 1].ts, edges[i].ts, kind});
        }
      }
    }
    open[static_cast<int>(edges[i].kind)] += edges[i].delta;
  }
  GpuTime& gpu = out.gpu;
  gpu.span_ms = edges.empty() ? 0 : (edges.back().ts - edges.front().ts) / 1000.0;
  gpu.compute_ms = us[0] / 1000.0;
  gpu.communication_ms = us[1] / 1000.0;
  gpu.memcpy_ms = us[2] / 1000.0;
  gpu.other_ms = us[3] / 1000.0;
  gpu.idle_ms = us[4] / 1000.0;
  gpu.busy_ms = gpu.compute_ms + gpu.communication_ms + gpu.memcpy_ms + gpu.other_ms;
  gpu.communication_total_ms = comm_total / 1000.0;
  gpu.overlap_pct = comm_total > 0 ? Percent(overlap, comm_total) : -1;

  std::sort(state.steps.begin(), state.steps.end(),
            [](const Span& a, const Span& b) { return a.start < b.start; });
  for (const Span& step : state.steps) {
    GpuStep s{names_[step.name], step.start / 1000.0, (step.end - step.start) / 1000.0, 0, 0};
    auto it = std::lower_bound(segments.begin(), segments.end(), step.start,
                               [](const Segment& seg, double t) { return seg.end <= t; });
    for (; it != segments.end() && it->start < step.end; ++it) {
      const double part = std::min(it->end, step.end) - std::max(it->start, step.start);
      if (part <= 0) continue;
      s.gpu_busy_ms += part / 1000.0;
      if (it->kind == GpuActivityKind::kCompute) s.gpu_compute_ms += part / 1000.0;
    }
    out.steps.push_back(s);
  }
  return out;
}

// As HTA's TraceDiff takes a rank's iterations: every profiler step, CPU operators that start in
// one, GPU activity whose launch lies in one.
RankOps GpuTimeSummaryBuilder::CollectOperators(int rank, RankState& state) {
  RankOps ops;
  ops.rank = rank;
  const std::vector<Span>& steps = state.profiler_steps;           // by start (Sweep)
  ops.steps = steps.empty() ? 1 : static_cast<int>(steps.size());  // none: the whole trace
  for (const Span& step : steps) ops.steps_us += step.end - step.start;
  auto in_a_step = [&steps](double ts) { return steps.empty() || SpanAt(steps, ts) != nullptr; };
  for (const Activity& a : state.activities) {
    auto launch = state.launches.find(a.correlation);
    if (launch == state.launches.end() ? !steps.empty() : !in_a_step(launch->second.earliest_us)) {
      continue;
    }
    OpTotal& total = ops.gpu[names_[a.name]];
    total.count += 1;
    total.total_us += a.end - a.start;
  }
  for (const Span& op : state.cpu_operators) {
    if (!in_a_step(op.start)) continue;
    OpTotal& total = ops.cpu[names_[op.name]];
    total.count += 1;
    total.total_us += op.end - op.start;
  }
  std::vector<Span>().swap(state.cpu_operators);
  return ops;
}

const GpuTimeSummaryBuilder::Span* GpuTimeSummaryBuilder::SpanAt(const std::vector<Span>& by_start,
                                                                 double ts) {
  auto after = std::upper_bound(by_start.begin(), by_start.end(), ts,
                                [](double t, const Span& span) { return t < span.start; });
  if (after == by_start.begin() || ts >= std::prev(after)->end) return nullptr;
  return &*std::prev(after);
}

void GpuTimeSummaryBuilder::EndRank(int rank) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  swept_[rank] =
      Sweep(rank, it->second, summary_.idle_causes[rank], summary_.launch_queues[rank],
            summary_.memory_bandwidth[rank], operators_ ? &summary_.operators[rank] : nullptr);
  ranks_.erase(it);
}

GpuTimeSummary GpuTimeSummaryBuilder::Finish(const std::vector<RankTraceInfo>& ranks) {
  while (!ranks_.empty()) EndRank(ranks_.begin()->first);
  GpuTimeSummary summary = std::move(summary_);
  summary.step_name = step_name_.empty() ? "ProfilerStep#N" : step_name_;
  for (auto& [rank, time] : swept_) {
    for (const RankTraceInfo& info : ranks) {
      if (info.rank == rank) time.host = info.host;
    }
    summary.ranks.push_back(std::move(time));
  }
  for (auto& [id, total] : kernels_) {
    total.name = names_[id];
    summary.top_kernels.push_back(total);
  }
  std::sort(summary.top_kernels.begin(), summary.top_kernels.end(),
            [](const KernelTotal& a, const KernelTotal& b) { return a.total_ms > b.total_ms; });
  if (summary.top_kernels.size() > GpuTimeSummary::kTopKernels) {
    summary.top_kernels.resize(GpuTimeSummary::kTopKernels);
  }
  summary.kernel_breakdown = kernel_breakdown_.Finish();
  summary.aten_ops = aten_ops_.Finish();

  CollectiveArrivals arrivals = MatchCollectives(collective_starts_, names_);
  summary.collectives = std::move(arrivals.collectives);
  summary.stragglers = std::move(arrivals.stragglers);
  summary.late_gpus = late_gpus_.Finish(straggler_candidates_);
  summary.speeds = CompareGpuSpeed(compute_work_, to_gpu_work_, from_gpu_work_);
  return summary;
}

}  // namespace dtrain
