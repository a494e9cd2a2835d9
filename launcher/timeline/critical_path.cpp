// The graph and its longest path follow HTA 0.5's CPGraph (hta/analyzers/critical_path_analysis.py)
// step by step, so that the two agree on the same trace; where they differ it is said here:
// - launches by the driver (cuLaunchKernelEx) count as launches, as in the rest of the summary;
//   HTA 0.5 leaves such kernels without a launch edge;
// - a trace is taken to drive one GPU (HTA also matches CUDA events by the GPU's pid);
// - an edge that goes back in time by 1 µs or more (activities that overlap on one stream, a
//   child operator that outlasts its parent by rounding) weighs 0 on the path and in the
//   breakdown; HTA finds the path with 0 too, but reports the negative time.
#include "launcher/timeline/critical_path.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

namespace dtrain {

using Event = PathEvent;
using Kind = PathEventKind;

namespace {

constexpr double kNoQueue = std::numeric_limits<double>::quiet_NaN();

// Where an arrow binds to a node's event (HTA's overlay): its start, or its end; a GPU record's
// end less up to 1 µs, so that the arrow lands inside it.
double BindAt(const Event& e, bool start) {
  if (start) return e.ts;
  return OnCpu(e.kind) ? e.end : e.end - std::min(1.0, e.end - e.ts);
}

}  // namespace

CriticalPathBuilder::CriticalPathBuilder(std::string step_name, std::string which)
    : step_name_(std::move(step_name)), which_(std::move(which)) {}

void CriticalPathBuilder::Add(const KinetoEvent& e) {
  if (e.rank != rank_) {
    BuildRank();
    rank_ = e.rank;
  }
  Kind kind;
  if (e.cat == "cpu_op") {
    kind = Kind::kOperator;
  } else if (e.cat == "cuda_runtime" || e.cat == "cuda_driver") {
    kind = Kind::kCall;
  } else if (e.cat == "cuda_sync") {
    kind = Kind::kSync;
  } else if (IsGpuActivityCategory(e.cat)) {
    if (e.stream < 0) return;
    kind = Kind::kGpu;
  } else if (e.cat == "gpu_user_annotation") {
    return;  // on a stream's track, never in the graph
  } else {
    kind = Kind::kCpuOther;
  }
  const uint32_t name = names_.Intern(e.name);
  events_.push_back(Event{e.ts_us, e.ts_us + e.dur_us,
                          kind == Kind::kGpu || kind == Kind::kSync ? e.stream : -1, e.correlation,
                          e.wait_on_stream, e.wait_on_record, name, e.thread, kind});
  if (e.cat == "user_annotation") {
    if (IsStepAnnotation(step_name_, e.name))
      steps_.push_back(Step{e.ts_us, e.ts_us + e.dur_us, name});
  }
}

RankCriticalPath CriticalPathBuilder::Build(int rank, std::vector<Event>& events,
                                            std::vector<Step>& steps) const {
  RankCriticalPath out;
  out.rank = rank;
  const std::string step_label = step_name_.empty() ? "ProfilerStep#N" : step_name_;
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.ts < b.ts; });
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Step& a, const Step& b) { return a.ts < b.ts; });
  out.steps = static_cast<int>(steps.size());
  for (const Event& e : events) out.sync_events |= e.kind == Kind::kSync;
  if (steps.empty()) {
    out.note = fmt::format("no {} step in the trace", step_label);
    return out;
  }
  // Which step.
  int chosen = -1;
  if (which_ == "slowest") {
    for (size_t i = 0; i < steps.size(); ++i) {
      if (chosen < 0 || steps[i].end - steps[i].ts > steps[chosen].end - steps[chosen].ts) {
        chosen = static_cast<int>(i);
      }
    }
  } else if (!which_.empty() && std::all_of(which_.begin(), which_.end(),
                                            [](char c) { return c >= '0' && c <= '9'; })) {
    const long index = std::strtol(which_.c_str(), nullptr, 10);
    if (index >= static_cast<long>(steps.size())) {
      out.note = fmt::format("step {} asked for; the trace has {} (0 to {})", which_, steps.size(),
                             steps.size() - 1);
      return out;
    }
    chosen = static_cast<int>(index);
  } else {
    for (size_t i = 0; i < steps.size() && chosen < 0; ++i) {
      if (names_[steps[i].name] == which_) chosen = static_cast<int>(i);
    }
    if (chosen < 0) {
      out.note = fmt::format("no step named {} in the trace ({} to {})", which_,
                             names_[steps.front().name], names_[steps.back().name]);
      return out;
    }
  }
  const Step& step = steps[chosen];
  out.step = names_[step.name];
  out.step_index = chosen;
  out.step_us = step.end - step.ts;

  // A launch or synchronisation call and the GPU record it made share a correlation.
  const int32_t n = static_cast<int32_t>(events.size());
  std::unordered_map<int64_t, int32_t> call_of, gpu_of;
  for (int32_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    if (e.correlation < 0) continue;
    if (e.kind == Kind::kCall) call_of.try_emplace(e.correlation, i);
    if (e.kind == Kind::kGpu || e.kind == Kind::kSync) gpu_of.try_emplace(e.correlation, i);
  }
  std::vector<int32_t> link(n, -1);
  for (int32_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    if (e.correlation < 0) continue;
    if (e.kind == Kind::kCall) {
      if (auto it = gpu_of.find(e.correlation); it != gpu_of.end()) link[i] = it->second;
    } else if (e.kind == Kind::kGpu || e.kind == Kind::kSync) {
      if (auto it = call_of.find(e.correlation); it != call_of.end()) link[i] = it->second;
    }
  }

  // The step's events: CPU events that start in it (and last), GPU records whose call does.
  auto in_step = [&](const Event& e) {
    return e.ts >= step.ts && e.ts <= step.end && e.end - e.ts > 0;
  };
  std::vector<char> clipped(n, 0);
  std::vector<int32_t> with_nodes;
  for (int32_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    if (OnCpu(e.kind)) {
      clipped[i] = in_step(e);
    } else if (link[i] >= 0) {
      clipped[i] = in_step(events[link[i]]) || names_[e.name] == "Stream Wait Event";
    }
    if (!clipped[i]) continue;
    if (e.kind == Kind::kOperator || e.kind == Kind::kCall ||
        (e.kind == Kind::kGpu || (e.kind == Kind::kSync && e.stream >= 0))) {
      with_nodes.push_back(i);
    }
  }
  PathGraph graph(events, with_nodes);

  // CPU threads: nested operators.
  std::map<int32_t, std::vector<int32_t>> threads;
  for (int32_t i = 0; i < n; ++i) {
    if (clipped[i] && OnCpu(events[i].kind)) threads[events[i].thread].push_back(i);
  }
  for (const auto& [thread, members] : threads) {
    AddThreadEdges(graph, events, names_, members);
  }

  // Launches (calls with a GPU activity), in time order, and each stream's queue: +1 at a launch
  // call, -1 when its activity starts.
  std::vector<int32_t> launches;
  for (int32_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    if (e.kind == Kind::kCall && link[i] >= 0 && events[link[i]].kind == Kind::kGpu &&
        ClassifyLaunchCall(names_[e.name]) != LaunchCallKind::kNone) {
      launches.push_back(i);
    }
  }
  std::vector<double> queue(n, kNoQueue);
  {
    std::map<int64_t, std::vector<std::pair<double, int32_t>>> by_stream;  // (ts, event)
    for (int32_t call : launches)
      by_stream[events[link[call]].stream].push_back({events[call].ts, call});
    for (int32_t call : launches) {
      by_stream[events[link[call]].stream].push_back({events[link[call]].ts, link[call]});
    }
    for (auto& [stream, points] : by_stream) {
      std::stable_sort(points.begin(), points.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      double length = 0;
      for (const auto& [ts, event] : points) {
        length += events[event].kind == Kind::kCall ? 1 : -1;
        queue[event] = length;
      }
    }
  }

  // CUDA events: the launch before each cudaEventRecord on the stream it recorded, and the launch
  // after each cudaStreamWaitEvent on its thread and the stream that waits.
  std::unordered_map<int64_t, int64_t> record_stream;  // record's correlation -> stream
  for (int32_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    if (e.kind == Kind::kSync && e.wait_on_stream > -1 && e.wait_on_record >= 0) {
      record_stream.try_emplace(e.wait_on_record, e.wait_on_stream);
    }
  }
  // Launch times by stream, and by thread and stream (launches are in time order).
  std::map<int64_t, std::vector<int32_t>> launches_on;
  std::map<std::pair<int32_t, int64_t>, std::vector<int32_t>> launches_by;
  for (int32_t call : launches) {
    const int64_t stream = events[link[call]].stream;
    launches_on[stream].push_back(call);
    launches_by[{events[call].thread, stream}].push_back(call);
  }
  auto ts_before = [&](int32_t call, double ts) { return events[call].ts < ts; };
  std::unordered_map<int64_t, int32_t> launch_before_record;  // record's correlation -> call
  std::unordered_map<int32_t, int32_t> launch_after_wait;     // wait call -> launch call
  for (int32_t i = 0; i < n; ++i) {
    const Event& e = events[i];
    if (e.kind != Kind::kCall) continue;
    const std::string& name = names_[e.name];
    if (name == "cudaEventRecord") {
      auto s = record_stream.find(e.correlation);
      if (s == record_stream.end()) continue;
      auto on = launches_on.find(s->second);
      if (on == launches_on.end()) continue;
      // The last launch at or before the record.
      auto after = std::upper_bound(on->second.begin(), on->second.end(), e.ts,
                                    [&](double ts, int32_t call) { return ts < events[call].ts; });
      if (after != on->second.begin()) launch_before_record.emplace(e.correlation, *(after - 1));
    } else if (name == "cudaStreamWaitEvent" && link[i] >= 0) {
      auto by = launches_by.find({e.thread, events[link[i]].stream});
      if (by == launches_by.end()) continue;
      // The first launch at or after the wait, on its thread and the stream that waits.
      auto next = std::lower_bound(by->second.begin(), by->second.end(), e.ts, ts_before);
      if (next != by->second.end()) launch_after_wait.emplace(i, *next);
    }
  }

  // GPU activities and synchronisation records, by start (synchronisation by end).
  std::vector<int32_t> gpu;
  for (int32_t i = 0; i < n; ++i) {
    if (clipped[i] && link[i] >= 0 &&
        (events[i].kind == Kind::kGpu || events[i].kind == Kind::kSync)) {
      gpu.push_back(i);
    }
  }
  auto sort_time = [&](int32_t i) {
    return events[i].kind == Kind::kSync ? events[i].end : events[i].ts;
  };
  std::stable_sort(gpu.begin(), gpu.end(),
                   [&](int32_t a, int32_t b) { return sort_time(a) < sort_time(b); });
  std::vector<std::pair<int64_t, int32_t>> last_on_stream;  // (stream, end node), first seen first
  auto last_of = [&](int64_t stream) -> int32_t {
    for (const auto& [s, node] : last_on_stream) {
      if (s == stream) return node;
    }
    return -1;
  };
  std::unordered_map<int32_t, int32_t> waits_for;  // kernel -> kernel it must wait for
  for (int32_t g : gpu) {
    const Event& e = events[g];
    if (e.kind == Kind::kSync) {
      const std::string& name = names_[e.name];
      if (name == "Stream Wait Event" || name == "Event Sync") {
        auto before = launch_before_record.find(e.wait_on_record);
        if (e.wait_on_record < 0 || before == launch_before_record.end()) continue;
        const int32_t source = link[before->second];
        if (name == "Stream Wait Event") {
          auto after = launch_after_wait.find(link[g]);
          if (after == launch_after_wait.end()) continue;
          waits_for[link[after->second]] = source;
        } else {
          graph.Add(graph.End(source), graph.End(link[g]), PathEdgeType::kSync);
        }
      } else if (name == "Context Sync") {
        for (const auto& [stream, node] : last_on_stream) {
          graph.Add(node, graph.End(link[g]), PathEdgeType::kSync);
        }
      } else if (name == "Stream Sync") {
        graph.Add(last_of(e.stream), graph.End(link[g]), PathEdgeType::kSync);
      }
      continue;
    }
    const int32_t start = graph.Start(g), end = graph.End(g);
    graph.Add(start, end, PathEdgeType::kOperator, false, g);
    int32_t sync_end = -1;
    if (auto w = waits_for.find(g); w != waits_for.end()) {
      sync_end = graph.End(w->second);
      if (sync_end >= 0) graph.Add(sync_end, start, PathEdgeType::kSync);
      waits_for.erase(w);
    }
    const Event& call = events[link[g]];
    const int32_t last = last_of(e.stream);
    if (queue[link[g]] == 1 && queue[g] == 0 && (last < 0 || graph.node(last).ts < call.ts) &&
        (sync_end < 0 || graph.node(sync_end).ts < call.ts)) {
      graph.Add(graph.Start(link[g]), start, PathEdgeType::kLaunchDelay);
    } else if (last >= 0 && (sync_end < 0 || graph.node(sync_end).ts < graph.node(last).ts)) {
      graph.Add(last, start, PathEdgeType::kKernelGap, false, graph.node(last).event);
    }
    bool found = false;
    for (auto& [stream, node] : last_on_stream) {
      if (stream == e.stream) {
        node = end;
        found = true;
      }
    }
    if (!found) last_on_stream.push_back({e.stream, end});
  }

  // The path, stretch by stretch.
  out.nodes = static_cast<int>(graph.node_count());
  out.edges = static_cast<int>(graph.edge_count());
  const std::optional<std::vector<int32_t>> path = graph.LongestPath();
  if (!path) {
    out.note = fmt::format(
        "{}: the events' times contradict each other (the graph has a cycle); no path", out.step);
    return out;
  }
  std::map<std::pair<uint32_t, PathBound>, PathStretch> stretches;
  for (int32_t id : *path) {
    const PathEdge& edge = graph.edge(id);
    out.path_us += edge.weight;
    std::optional<PathBound> bound;
    int32_t event = edge.event;
    switch (edge.type) {
      case PathEdgeType::kKernelGap:
        bound = PathBound::kKernelGap;
        break;
      case PathEdgeType::kLaunchDelay:
        bound = PathBound::kLaunchDelay;
        event = graph.node(edge.to).event;  // named after the kernel it launched
        break;
      case PathEdgeType::kOperator:
        if (event < 0) break;
        if (OnCpu(events[event].kind)) {
          bound = PathBound::kCpu;
        } else {
          bound = ClassifyGpuActivity(names_[events[event].name]) == GpuActivityKind::kCommunication
                      ? PathBound::kGpuCommunication
                      : PathBound::kGpuCompute;
        }
        break;
      case PathEdgeType::kDependency:
      case PathEdgeType::kSync:
        break;
    }
    const PathNode& from = graph.node(edge.from);
    const PathNode& to = graph.node(edge.to);
    PathLink link{edge.type,
                  std::nullopt,
                  "",
                  from.ts,
                  to.ts,
                  edge.weight,
                  events[from.event].thread,
                  events[to.event].thread,
                  BindAt(events[from.event], from.start),
                  BindAt(events[to.event], to.start)};
    if (bound && event >= 0) {
      link.bound = bound;
      link.name = names_[events[event].name];
    }
    out.links.push_back(std::move(link));
    if (!bound || event < 0) continue;
    out.bound_us[static_cast<size_t>(*bound)] += edge.weight;
    PathStretch& s = stretches[{events[event].name, *bound}];
    s.name = names_[events[event].name];
    s.bound = *bound;
    s.us += edge.weight;
    s.count += 1;
  }
  for (auto& [key, s] : stretches) out.stretches.push_back(std::move(s));
  std::stable_sort(out.stretches.begin(), out.stretches.end(),
                   [](const PathStretch& a, const PathStretch& b) { return a.us > b.us; });
  if (out.stretches.size() > 8) out.stretches.resize(8);
  return out;
}

void CriticalPathBuilder::BuildRank() {
  if (rank_ < 0) return;
  RankCriticalPath path = Build(rank_, events_, steps_);
  if (paths_.count(rank_)) {
    // Not from the merge (one trace per rank): the rank's earlier events are gone.
    path.note = "the rank's events came apart; no path";
  }
  paths_[rank_] = std::move(path);
  std::vector<Event>().swap(events_);
  std::vector<Step>().swap(steps_);
}

const RankCriticalPath* CriticalPathBuilder::EndRank() {
  const int rank = rank_;
  if (rank < 0) return nullptr;
  BuildRank();
  rank_ = -1;
  return &paths_.at(rank);
}

std::vector<RankCriticalPath> CriticalPathBuilder::Finish() {
  BuildRank();
  rank_ = -1;
  std::vector<RankCriticalPath> out;
  for (auto& [rank, path] : paths_) out.push_back(std::move(path));
  paths_.clear();
  return out;
}

}  // namespace dtrain
