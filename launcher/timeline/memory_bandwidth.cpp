#include "launcher/timeline/memory_bandwidth.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "launcher/timeline/running_stats.h"
#include "launcher/timeline/summary_numbers.h"

namespace dtrain {

std::map<std::string, std::vector<CounterPoint>> MemoryBandwidthSeries(
    const std::vector<MemoryCopy>& copies) {
  std::map<std::string, std::vector<std::pair<double, double>>> steps;
  for (const MemoryCopy& c : copies) {
    const double end = c.end == c.start ? c.start + 1 : c.end;  // as HTA: no time lasts 1 µs
    steps[c.kind].push_back({c.start, c.gbps});
    steps[c.kind].push_back({end, -c.gbps});
  }
  std::map<std::string, std::vector<CounterPoint>> out;
  for (auto& [kind, kind_steps] : steps) out[kind] = CumulativeSeries(std::move(kind_steps));
  return out;
}

std::vector<MemoryBandwidth> SummarizeMemoryBandwidth(const std::vector<MemoryCopy>& copies) {
  std::vector<MemoryBandwidth> out;
  for (const auto& [kind, series] : MemoryBandwidthSeries(copies)) {
    std::vector<double> values;
    for (const CounterPoint& p : series) {
      if (p.value > 0) values.push_back(p.value);
    }
    if (values.empty()) continue;
    MemoryBandwidth& b = out.emplace_back();
    b.kind = kind;
    b.points = static_cast<int64_t>(values.size());
    RunningStats stats;
    for (double v : values) stats.Add(v);
    b.mean = stats.mean;
    if (stats.count > 1) b.std = stats.std_dev();
    std::sort(values.begin(), values.end());
    b.min = values.front();
    b.p25 = Quantile(values, 0.25);
    b.p50 = Quantile(values, 0.5);
    b.p75 = Quantile(values, 0.75);
    b.max = values.back();
  }
  return out;
}

std::string FormatMemoryBandwidth(const std::map<int, std::vector<MemoryBandwidth>>& by_rank) {
  std::string rows;
  for (const auto& [rank, kinds] : by_rank) {
    for (const MemoryBandwidth& b : kinds) {
      rows += fmt::format(
          "{:>5}  {:<14} {:>6} {:>9.4g} {:>9} {:>9.4g} {:>9.4g} {:>9.4g} {:>9.4g} "
          "{:>9.4g}\n",
          rank, b.kind, b.points, b.mean,
          b.std < 0 ? std::string("-") : fmt::format("{:.4g}", b.std), b.min, b.p25, b.p50, b.p75,
          b.max);
    }
  }
  if (rows.empty()) return "";
  return "Memory bandwidth per rank, GB/s (as HTA's memory bandwidth summary)\n" +
         fmt::format("{:>5}  {:<14} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "rank",
                     "kind", "points", "mean", "std", "min", "25%", "50%", "75%", "max") +
         rows +
         "(the copies of a kind in flight, summed, at each point where that changes; points at 0 "
         "left out)\n";
}

nlohmann::json MemoryBandwidthJson(const std::vector<MemoryBandwidth>& kinds) {
  // To the kB/s: a memset's figures are thousandths of a GB/s.
  auto round = [](double gbps) { return std::round(gbps * 1e6) / 1e6; };
  nlohmann::json out = nlohmann::json::array();
  for (const MemoryBandwidth& b : kinds) {
    out.push_back({{"kind", b.kind},
                   {"points", b.points},
                   {"mean", round(b.mean)},
                   {"std", b.std < 0 ? nlohmann::json(nullptr) : nlohmann::json(round(b.std))},
                   {"min", round(b.min)},
                   {"p25", round(b.p25)},
                   {"p50", round(b.p50)},
                   {"p75", round(b.p75)},
                   {"max", round(b.max)}});
  }
  return out;
}

}  // namespace dtrain
