#include "launcher/timeline/gpu_annotation_breakdown.h"

#include <algorithm>

#include <fmt/format.h>

namespace dtrain {
namespace {

constexpr size_t kShownPerRank = 6;

}  // namespace

void GpuAnnotationBreakdownBuilder::Add(const KinetoEvent& e) {
  if (e.cat != "gpu_user_annotation") return;
  auto& names = ranks_[e.rank];
  auto it = names.find(e.name);
  if (it == names.end()) it = names.emplace(std::string(e.name), RunningStats{}).first;
  it->second.Add(e.dur_us);
}

std::vector<RankAnnotations> GpuAnnotationBreakdownBuilder::Finish() const {
  std::vector<RankAnnotations> out;
  for (const auto& [rank, names] : ranks_) {
    RankAnnotations& r = out.emplace_back();
    r.rank = rank;
    for (const auto& [name, run] : names) {
      AnnotationTime a;
      a.name = name;
      a.count = run.count;
      a.sum_us = run.sum;
      a.mean_us = run.mean;
      a.min_us = run.min;
      a.max_us = run.max;
      a.std_us = run.std_dev();
      r.regions.push_back(std::move(a));
    }
    std::stable_sort(
        r.regions.begin(), r.regions.end(),
        [](const AnnotationTime& a, const AnnotationTime& b) { return a.sum_us > b.sum_us; });
  }
  return out;
}

std::string FormatGpuAnnotations(const std::vector<RankAnnotations>& ranks) {
  std::string rows;
  for (const RankAnnotations& r : ranks) {
    size_t shown = 0, left = 0;
    for (const AnnotationTime& a : r.regions) {
      if (IsStepAnnotation("", a.name)) continue;  // ProfilerStep#N
      if (shown == kShownPerRank) {
        ++left;
        continue;
      }
      ++shown;
      const std::string name = a.name.size() > 40 ? a.name.substr(0, 37) + "..." : a.name;
      rows += fmt::format("{:>5}  {:<40} {:>6} {:>10.2f} {:>9.3f} {:>9.3f}\n", r.rank, name,
                          a.count, a.sum_us / 1000.0, a.mean_us / 1000.0, a.max_us / 1000.0);
    }
    if (left > 0) rows += fmt::format("{:>5}  (and {} more; all in --json)\n", r.rank, left);
  }
  if (rows.empty()) return "";
  return "GPU time by record_function region (the GPU's user annotations; as HTA's GPU user "
         "annotation breakdown)\n" +
         fmt::format("{:>5}  {:<40} {:>6} {:>10} {:>9} {:>9}\n", "rank", "region", "count",
                     "total ms", "mean ms", "max ms") +
         rows;
}

nlohmann::json GpuAnnotationsJson(const std::vector<RankAnnotations>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankAnnotations& r : ranks) {
    nlohmann::json regions = nlohmann::json::array();
    for (const AnnotationTime& a : r.regions) {
      regions.push_back({{"name", a.name},
                         {"count", a.count},
                         {"sum_us", a.sum_us},
                         {"mean_us", a.mean_us},
                         {"min_us", a.min_us},
                         {"max_us", a.max_us},
                         {"std_us", a.std_us}});
    }
    out.push_back({{"rank", r.rank}, {"regions", std::move(regions)}});
  }
  return out;
}

}  // namespace dtrain
