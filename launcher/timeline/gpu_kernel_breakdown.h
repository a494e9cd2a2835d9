// GPU kernel time by type and by kernel, per rank, from PyTorch profiler traces, as
// HolisticTraceAnalysis 0.5's get_gpu_kernel_breakdown splits it (memory kernels included, as
// its TraceAnalysis does by default):
// - by type, over all ranks: each rank's compute, communication and memory kernels merged into
//   one stretch per type, and the time in each mix of types ("COMPUTATION overlapping
//   COMMUNICATION" when both run at once) summed over the ranks, with its share of the whole;
// - by kernel, per rank and type: count, total, mean, shortest, longest and standard deviation (of
//   a sample, 0 for one) of each kernel's runs; of more than ten kernels of a type, those past
//   the ten with the most time or past 80% of the type's time (HTA's quantile of the running
//   total) are summed as "others".
// The GPU activity counted is that of the temporal breakdown (gpu_time_summary.h): HTA leaves
// out what was launched during a rank's last profiler step as it loads a trace.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/kineto_trace.h"
#include "launcher/timeline/name_table.h"
#include "launcher/timeline/running_stats.h"

namespace dtrain {

// One mix of kernel types, over all ranks.
struct KernelTypeTime {
  std::string type;  // HTA's label: "COMPUTATION", "COMPUTATION overlapping MEMORY", ...
  double sum_us = 0;
  double percent = 0;  // of all kernel time by type
};

// One kernel (or "others") on one rank.
struct RankKernelTime {
  int rank = 0;
  GpuActivityKind kind = GpuActivityKind::kCompute;
  std::string name;  // "others": the kernels of the type past the ones listed
  int64_t count = 0;
  double sum_us = 0, mean_us = 0, min_us = 0, max_us = 0, std_us = 0;
};

struct GpuKernelBreakdown {
  std::vector<KernelTypeTime> types;    // most time first; mixes with none left out
  std::vector<RankKernelTime> kernels;  // HTA's listing: by type (its label), name, then rank
  std::vector<RankKernelTime> runs;     // every kernel of every rank (no "others"), same order
  int ranks = 0;                        // ranks with GPU kernels
};

class GpuKernelBreakdownBuilder {
 public:
  // One kernel, copy or memset of `rank` (OTHER kinds are left out, as HTA leaves them out).
  void Add(int rank, GpuActivityKind kind, std::string_view name, double start_us, double end_us);
  // Sums `rank`'s time by type and lets its kernels' times go (Finish does it for the ranks left).
  void EndRank(int rank);
  GpuKernelBreakdown Finish();

  // HTA's defaults: at most this many kernels of a type listed per rank, and those within this
  // share of the type's time.
  static constexpr size_t kKernelsListed = 10;
  static constexpr double kDurationRatio = 0.8;

 private:
  struct Interval {
    double start, end;
  };
  struct RankState {
    std::vector<Interval> intervals[3];  // by kind: compute, communication, memory
    std::map<std::pair<GpuActivityKind, uint32_t>, RunningStats> kernels;
  };
  std::map<int, RankState> ranks_;
  std::map<int, double> mix_us_;  // by bit mask (COMPUTATION 1, COMMUNICATION 2, MEMORY 4)
  NameTable names_;
};

// The summary's section: the time by type, and the kernels with the most time over all ranks,
// each with how long one run takes on the median rank and which rank's runs are slowest; --json
// has HTA's listing of every rank's kernels.
std::string FormatGpuKernelBreakdown(const GpuKernelBreakdown& breakdown);
nlohmann::json GpuKernelBreakdownJson(const GpuKernelBreakdown& breakdown);

}  // namespace dtrain
