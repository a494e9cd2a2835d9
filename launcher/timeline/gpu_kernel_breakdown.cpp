// Follows HTA 0.5.0's BreakdownAnalysis.get_gpu_kernel_breakdown (hta/analyzers/
// breakdown_analysis.py): _get_gpu_kernel_type_time for the types, _aggr_gpu_kernel_time for the
// kernels. One difference, on purpose: where HTA groups more than ten kernels, it aggregates the
// per-kernel totals a second time, so that a listed kernel's max, min and mean come out as its
// total and its deviation as 0, and "others" gets the statistics of the totals; here each listed
// kernel keeps the statistics of its runs, and "others" those of all the runs it sums.
#include "launcher/timeline/gpu_kernel_breakdown.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "launcher/timeline/summary_numbers.h"

namespace dtrain {
namespace {

// HTA's names of the kinds, in the order of its bit mask (COMPUTATION 1, COMMUNICATION 2,
// MEMORY 4), which is the order the names of a mix are joined in.
constexpr const char* kTypeNames[3] = {"COMPUTATION", "COMMUNICATION", "MEMORY"};

const char* TypeName(GpuActivityKind kind) {
  return kTypeNames[static_cast<int>(kind)];
}

std::string MixName(int mask) {
  std::string out;
  for (int k = 0; k < 3; ++k) {
    if ((mask & (1 << k)) == 0) continue;
    if (!out.empty()) out += " overlapping ";
    out += kTypeNames[k];
  }
  return out;
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

constexpr size_t kKernelsShown = 10;

RankKernelTime KernelTime(int rank, GpuActivityKind kind, std::string name,
                          const RunningStats& runs) {
  return RankKernelTime{rank,      kind,     std::move(name), runs.count,    runs.sum,
                        runs.mean, runs.min, runs.max,        runs.std_dev()};
}

}  // namespace

void GpuKernelBreakdownBuilder::Add(int rank, GpuActivityKind kind, std::string_view name,
                                    double start_us, double end_us) {
  if (kind == GpuActivityKind::kOther) return;
  RankState& state = ranks_[rank];
  state.intervals[static_cast<int>(kind)].push_back({start_us, end_us});
  state.kernels[{kind, names_.Intern(name)}].Add(end_us - start_us);
}

void GpuKernelBreakdownBuilder::EndRank(int rank) {
  auto found = ranks_.find(rank);
  if (found == ranks_.end()) return;
  // Each type's kernels merged into stretches, then one sweep over their edges.
  std::vector<std::pair<double, int>> edges;  // time, +bit at a start, -bit at an end
  for (int k = 0; k < 3; ++k) {
    std::vector<Interval>& spans = found->second.intervals[k];
    std::sort(spans.begin(), spans.end(),
              [](const Interval& a, const Interval& b) { return a.start < b.start; });
    for (size_t i = 0; i < spans.size();) {
      double start = spans[i].start, end = spans[i].end;
      for (++i; i < spans.size() && spans[i].start <= end; ++i) end = std::max(end, spans[i].end);
      edges.push_back({start, 1 << k});
      edges.push_back({end, -(1 << k)});
    }
    std::vector<Interval>().swap(spans);
  }
  std::sort(edges.begin(), edges.end());
  int mask = 0;
  for (size_t i = 0; i < edges.size(); ++i) {
    if (i > 0 && mask > 0) mix_us_[mask] += edges[i].first - edges[i - 1].first;
    mask += edges[i].second;
  }
}

GpuKernelBreakdown GpuKernelBreakdownBuilder::Finish() {
  GpuKernelBreakdown out;
  for (const auto& [rank, state] : ranks_) {
    ++out.ranks;
    EndRank(rank);
    // The kernels of each type, most time first; past the listed ones, "others".
    std::map<GpuActivityKind, std::vector<std::pair<std::string, RunningStats>>> by_type;
    for (const auto& [key, running] : state.kernels) {
      by_type[key.first].push_back({names_[key.second], running});
    }
    for (auto& [kind, kernels] : by_type) {
      std::stable_sort(kernels.begin(), kernels.end(),
                       [](const auto& a, const auto& b) { return a.second.sum > b.second.sum; });
      std::vector<bool> listed(kernels.size(), true);
      if (kernels.size() > kKernelsListed) {
        std::vector<double> running_total;
        double total = 0;
        for (const auto& kernel : kernels) running_total.push_back(total += kernel.second.sum);
        const double cut = Quantile(running_total, kDurationRatio);
        for (size_t i = 0; i < kernels.size(); ++i) {
          listed[i] = i < kKernelsListed && running_total[i] <= cut;
        }
      }
      RunningStats others;
      for (size_t i = 0; i < kernels.size(); ++i) {
        out.runs.push_back(KernelTime(rank, kind, kernels[i].first, kernels[i].second));
        if (!listed[i]) {
          others.Merge(kernels[i].second);
          continue;
        }
        out.kernels.push_back(out.runs.back());
      }
      if (others.count > 0) {
        out.kernels.push_back(KernelTime(rank, kind, "others", others));
      }
    }
  }
  double all_us = 0;
  for (const auto& [mask, us] : mix_us_) all_us += us;
  for (const auto& [mask, us] : mix_us_) {
    if (us > 0) out.types.push_back({MixName(mask), us, Percent(us, all_us)});
  }
  std::stable_sort(
      out.types.begin(), out.types.end(),
      [](const KernelTypeTime& a, const KernelTypeTime& b) { return a.sum_us > b.sum_us; });
  for (std::vector<RankKernelTime>* list : {&out.kernels, &out.runs}) {
    std::stable_sort(list->begin(), list->end(),
                     [](const RankKernelTime& a, const RankKernelTime& b) {
                       return std::make_tuple(std::string_view(TypeName(a.kind)), a.name, a.rank) <
                              std::make_tuple(std::string_view(TypeName(b.kind)), b.name, b.rank);
                     });
  }
  return out;
}

std::string FormatGpuKernelBreakdown(const GpuKernelBreakdown& breakdown) {
  if (breakdown.types.empty()) return "";
  std::string out = fmt::format(
      "GPU kernels, {} rank(s) (as HTA's kernel breakdown; every rank's in --json)\n  by type:",
      breakdown.ranks);
  for (const KernelTypeTime& t : breakdown.types) {
    out += fmt::format(" {} {:.2f} ms ({:.1f}%)", Lower(t.type), t.sum_us / 1000.0, t.percent);
    if (&t != &breakdown.types.back()) out += ',';
  }
  out += "\n  (while kernels of two types run at once, the time counts as \"X overlapping Y\")\n";

  // Each kernel over every rank that ran it, the most time first.
  struct Across {
    GpuActivityKind kind;
    std::string_view name;
    int64_t count = 0;
    double sum_us = 0;
    std::vector<std::pair<double, int>> means;  // mean run, rank
  };
  std::map<std::pair<GpuActivityKind, std::string_view>, Across> across;
  for (const RankKernelTime& k : breakdown.runs) {
    Across& a = across[{k.kind, k.name}];
    a.kind = k.kind;
    a.name = k.name;
    a.count += k.count;
    a.sum_us += k.sum_us;
    a.means.push_back({k.mean_us, k.rank});
  }
  std::vector<Across> rows;
  for (auto& [key, a] : across) rows.push_back(std::move(a));
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Across& a, const Across& b) { return a.sum_us > b.sum_us; });
  out += fmt::format(
      "  the kernels with the most time over all ranks (median us: the median over the ranks of a "
      "run's\n  mean; slowest: the rank whose runs take longest, and by how much against that)\n"
      "{:<13} {:<50} {:>5} {:>6} {:>10} {:>10} {:>12}\n",
      "type", "kernel", "ranks", "runs", "total ms", "median us", "slowest");
  for (size_t i = 0; i < rows.size() && i < kKernelsShown; ++i) {
    const Across& a = rows[i];
    std::vector<double> means;
    for (const auto& [mean, rank] : a.means) means.push_back(mean);
    const double median = Median(means);
    const auto slowest = *std::max_element(a.means.begin(), a.means.end());
    const std::string name =
        a.name.size() > 50 ? std::string(a.name.substr(0, 47)) + "..." : std::string(a.name);
    out += fmt::format("{:<13} {:<50} {:>5} {:>6} {:>10.2f} {:>10.1f} {:>12}\n",
                       Lower(TypeName(a.kind)), name, a.means.size(), a.count, a.sum_us / 1000.0,
                       median,
                       a.means.size() < 2 ? std::string("-")
                                          : fmt::format("{} ({:.2f}x)", slowest.second,
                                                        median > 0 ? slowest.first / median : 1.0));
  }
  if (rows.size() > kKernelsShown) {
    out += fmt::format("(and {} more kernel(s))\n", rows.size() - kKernelsShown);
  }
  return out;
}

nlohmann::json GpuKernelBreakdownJson(const GpuKernelBreakdown& breakdown) {
  nlohmann::json types = nlohmann::json::array();
  for (const KernelTypeTime& t : breakdown.types) {
    types.push_back({{"type", t.type}, {"sum_us", t.sum_us}, {"percent", Round3(t.percent)}});
  }
  nlohmann::json kernels = nlohmann::json::array();
  for (const RankKernelTime& k : breakdown.kernels) {
    kernels.push_back({{"rank", k.rank},
                       {"type", TypeName(k.kind)},
                       {"name", k.name},
                       {"count", k.count},
                       {"sum_us", k.sum_us},
                       {"mean_us", k.mean_us},
                       {"min_us", k.min_us},
                       {"max_us", k.max_us},
                       {"std_us", k.std_us}});
  }
  return {{"types", std::move(types)}, {"kernels", std::move(kernels)}};
}

}  // namespace dtrain
