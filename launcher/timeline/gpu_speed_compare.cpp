#include "launcher/timeline/gpu_speed_compare.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "launcher/timeline/summary_numbers.h"

namespace dtrain {
namespace {

// One kind of work on every rank of `ranks`, against the median rank, work by work.
std::map<int, WorkSpeed> Compare(const std::map<int, RankWork>& work, const std::set<int>& ranks) {
  std::map<int, WorkSpeed> out;
  if (ranks.size() < 2) return out;
  auto first = work.find(*ranks.begin());
  if (first == work.end()) return out;
  std::map<int, double> reference_us;
  for (const auto& [what, unused] : first->second) {
    struct OnRank {
      int rank;
      const SameWork* work;
      double median_us;
    };
    std::vector<OnRank> on_ranks;
    for (int rank : ranks) {
      auto it = work.find(rank);
      if (it == work.end()) break;
      auto same = it->second.find(what);
      if (same == it->second.end() || same->second.durations_us.empty()) break;
      on_ranks.push_back({rank, &same->second, Median(same->second.durations_us)});
    }
    if (on_ranks.size() != ranks.size()) continue;  // not on every rank
    std::vector<double> medians;
    for (const OnRank& r : on_ranks) medians.push_back(r.median_us);
    std::sort(medians.begin(), medians.end());
    const double reference =
        medians[(medians.size() - 1) / 2];  // the faster middle of an even count
    if (reference <= 0) continue;
    for (const OnRank& r : on_ranks) {
      const int64_t count = static_cast<int64_t>(r.work->durations_us.size());
      WorkSpeed& speed = out[r.rank];
      speed.kinds += 1;
      speed.count += count;
      speed.bytes += count * r.work->bytes;
      speed.time_us += count * r.median_us;
      reference_us[r.rank] += count * reference;
    }
  }
  for (auto& [rank, speed] : out) {
    if (reference_us[rank] > 0) speed.ratio = speed.time_us / reference_us[rank];
  }
  return out;
}

std::string CopyCell(const WorkSpeed& copies) {
  if (copies.ratio < 0) return "-";
  return fmt::format("{:.1f} GB/s ({:.2f})", copies.gigabytes_per_second(), copies.ratio);
}

std::string Rank(int rank, const std::map<int, std::string>& hosts) {
  auto host = hosts.find(rank);
  return host == hosts.end() || host->second.empty()
             ? fmt::format("Rank {}", rank)
             : fmt::format("Rank {} ({})", rank, host->second);
}

double Rounded(double value, double unit) {
  return std::round(value / unit) * unit;
}

}  // namespace

std::vector<RankSpeed> CompareGpuSpeed(const std::map<int, RankWork>& compute,
                                       const std::map<int, RankWork>& to_gpu,
                                       const std::map<int, RankWork>& from_gpu) {
  std::set<int> ranks;
  for (const auto* work : {&compute, &to_gpu, &from_gpu}) {
    for (const auto& [rank, unused] : *work) ranks.insert(rank);
  }
  const std::map<int, WorkSpeed> c = Compare(compute, ranks);
  const std::map<int, WorkSpeed> t = Compare(to_gpu, ranks);
  const std::map<int, WorkSpeed> f = Compare(from_gpu, ranks);
  std::vector<RankSpeed> out;
  if (ranks.size() < 2) return out;
  for (int rank : ranks) {
    RankSpeed speed;
    speed.rank = rank;
    if (auto it = c.find(rank); it != c.end()) speed.compute = it->second;
    if (auto it = t.find(rank); it != t.end()) speed.to_gpu = it->second;
    if (auto it = f.find(rank); it != f.end()) speed.from_gpu = it->second;
    out.push_back(speed);
  }
  return out;
}

std::string FormatGpuSpeed(const std::vector<RankSpeed>& speeds,
                           const std::map<int, std::string>& hosts) {
  bool any = false;
  for (const RankSpeed& s : speeds) {
    any = any || s.compute.ratio >= 0 || s.to_gpu.ratio >= 0 || s.from_gpu.ratio >= 0;
  }
  if (!any) return "";
  std::string out =
      "GPU speed per rank (the kernels and copies every rank ran, timed against the median "
      "rank: 1.00 is its\nspeed, 1.25 takes 25% longer)\n";
  out += fmt::format("{:>5}  {:<12} {:>8} {:>8} {:>20} {:>20}\n", "rank", "host", "compute",
                     "kernels", "to GPU", "from GPU");
  std::string slow;
  for (const RankSpeed& s : speeds) {
    auto host = hosts.find(s.rank);
    out +=
        fmt::format("{:>5}  {:<12} {:>8} {:>8} {:>20} {:>20}\n", s.rank,
                    host == hosts.end() || host->second.empty() ? "-" : host->second,
                    s.compute.ratio < 0 ? std::string("-") : fmt::format("{:.2f}", s.compute.ratio),
                    s.compute.kinds, CopyCell(s.to_gpu), CopyCell(s.from_gpu));
    if (s.compute.ratio >= kSlowComputeRatio) {
      slow += fmt::format(
          "{} runs the same compute kernels {:.0f}% slower than the median rank: its GPU may be "
          "held at lower clocks (power or thermal limits, a fault); `dtrain doctor` on its node "
          "reads the clock-event reasons and the GPU's health.\n",
          Rank(s.rank, hosts), Rounded(100 * (s.compute.ratio - 1), 1));
    }
    for (const auto& [copies, way] :
         {std::pair{&s.to_gpu, "to its GPU"}, std::pair{&s.from_gpu, "from its GPU"}}) {
      if (copies->ratio < kSlowCopyRatio) continue;
      slow += fmt::format(
          "{} copies {} at {:.1f} GB/s, {:.1f}x the median rank's time for the same copies: its "
          "PCIe link may run below its width or speed, or the GPU sit far from the CPU; `dtrain "
          "doctor` on its node checks the link.\n",
          Rank(s.rank, hosts), way, copies->gigabytes_per_second(), copies->ratio);
    }
  }
  return out + slow;
}

nlohmann::json GpuSpeedJson(const RankSpeed& speed) {
  using nlohmann::json;
  auto ratio = [](const WorkSpeed& w) {
    return w.ratio < 0 ? json(nullptr) : json(Rounded(w.ratio, 0.0001));
  };
  auto rate = [](const WorkSpeed& w) {
    return w.ratio < 0 ? json(nullptr) : json(Rounded(w.gigabytes_per_second(), 0.001));
  };
  return {{"compute_ratio", ratio(speed.compute)}, {"compute_kernels", speed.compute.kinds},
          {"to_gpu_gbps", rate(speed.to_gpu)},     {"to_gpu_ratio", ratio(speed.to_gpu)},
          {"from_gpu_gbps", rate(speed.from_gpu)}, {"from_gpu_ratio", ratio(speed.from_gpu)}};
}

}  // namespace dtrain
