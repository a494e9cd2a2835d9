// The series follow HTA 0.5's TraceCounters (_get_queue_length_time_series_for_rank,
// _get_memory_bw_time_series_for_rank): a cumulative sum of +1/-1 (or +GB/s/-GB/s) steps in time
// order, per stream (per kind of copy). Where several steps fall at one time only the value after
// the last is written: the order HTA's unstable sort gives steps at one time is arbitrary, the
// value after them is not.
#include "launcher/timeline/counter_tracks.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "launcher/timeline/memory_bandwidth.h"
#include "launcher/timeline/trace_record.h"

namespace dtrain {

std::string MemoryKernelKind(std::string_view name) {
  if (name.substr(0, 6) == "Memset") return "Memset";
  if (name.substr(0, 6) != "Memcpy") return "Memcpy Unknown";
  return std::string(name.substr(0, 11));
}

std::vector<CounterPoint> CumulativeSeries(std::vector<std::pair<double, double>> steps) {
  std::stable_sort(steps.begin(), steps.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<CounterPoint> out;
  double value = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    value += steps[i].second;
    if (i + 1 < steps.size() && steps[i + 1].first == steps[i].first) continue;
    out.push_back({steps[i].first, std::fabs(value) < 1e-9 ? 0.0 : value});
  }
  return out;
}

void CounterTracksBuilder::Add(const KinetoEvent& e) {
  if (e.cat == "cuda_runtime" || e.cat == "cuda_driver") {
    if (e.correlation >= 0 && ClassifyLaunchCall(e.name) != LaunchCallKind::kNone) {
      ranks_[e.rank].launch_ts.try_emplace(e.correlation, e.ts_us);
    }
    return;
  }
  if (!IsGpuActivityCategory(e.cat) || e.stream < 0) return;
  Activity a{e.ts_us, e.ts_us + e.dur_us, e.stream, e.correlation, -1, -1};
  if (ClassifyGpuActivity(e.name) == GpuActivityKind::kMemory) {
    a.memory_bw_gbps = std::max(0.0, e.memory_bw_gbps);  // none recorded: 0, as HTA takes it
    a.memory_kind = static_cast<int32_t>(kinds_.Intern(MemoryKernelKind(e.name)));
  }
  ranks_[e.rank].activities.push_back(a);
}

RankCounters CounterTracksBuilder::RankSeries(const Rank& data) const {
  std::map<int64_t, std::vector<std::pair<double, double>>> queue;
  std::vector<MemoryCopy> copies;
  for (const Activity& a : data.activities) {
    if (auto launch = data.launch_ts.find(a.correlation); launch != data.launch_ts.end()) {
      queue[a.stream].push_back({launch->second, 1});
      queue[a.stream].push_back({a.ts, -1});
    }
    if (a.memory_kind >= 0) {
      copies.push_back(
          {kinds_[static_cast<uint32_t>(a.memory_kind)], a.ts, a.end, a.memory_bw_gbps});
    }
  }
  RankCounters counters;
  for (auto& [stream, steps] : queue) {
    counters[fmt::format("Queue length (stream {})", stream)] = CumulativeSeries(std::move(steps));
  }
  for (auto& [kind, series] : MemoryBandwidthSeries(copies)) {
    counters[kind + " bandwidth"] = std::move(series);
  }
  return counters;
}

std::map<int, RankCounters> CounterTracksBuilder::Series() const {
  std::map<int, RankCounters> out;
  for (const auto& [rank, data] : ranks_) out[rank] = RankSeries(data);
  return out;
}

void CounterTracksBuilder::WriteRank(int rank, MergedTraceFile& out) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  const RankCounters counters = RankSeries(it->second);
  ranks_.erase(it);
  std::string record;
  for (const auto& [name, points] : counters) {
    const bool queue = name.rfind("Queue", 0) == 0;
    const std::string head =
        fmt::format(R"({{"ph":"C","name":{},"pid":{},"ts":)", EncodeJsonString(name), rank);
    for (const CounterPoint& p : points) {
      record = head;
      AppendMicros(std::llround(p.ts_us * 1000.0), record);
      record += queue ? fmt::format(R"(,"args":{{"launches":{:.0f}}}}})", p.value)
                      : fmt::format(R"(,"args":{{"GB/s":{:.10g}}}}})", p.value);
      out.WriteText(record);
    }
  }
}

}  // namespace dtrain
