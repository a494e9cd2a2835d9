// Counter tracks drawn into the merged trace from each rank's PyTorch profiler trace, as
// HolisticTraceAnalysis' trace with counters (generate_trace_with_counters) adds them, to read
// beside the kernels in Perfetto or chrome://tracing:
// - "Queue length (stream S)": the launches the CPU had made on stream S that the GPU had not
//   started yet (HTA's queue length: +1 when a launch call starts, -1 when its activity starts);
//   the driver's launches (cuLaunchKernel, cuLaunchKernelEx) count, as in the summary;
// - "Memcpy DtoH bandwidth", "Memcpy HtoD ...", "Memcpy DtoD ...", "Memset ...": the GB/s of the
//   copies (sets) of that kind running at each moment, summed (HTA's memory bandwidth time series,
//   from Kineto's "memory bandwidth (GB/s)" of each copy).
// Each is one counter ("C") record per time its value changes, in the rank's process, written
// when the merge has read the rank's trace.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "launcher/timeline/kineto_trace.h"
#include "launcher/timeline/merged_trace_file.h"
#include "launcher/timeline/name_table.h"

namespace dtrain {

// One counter's value from `ts_us` on (merged clock).
struct CounterPoint {
  double ts_us;
  double value;
};

// One rank's counters: by track name ("Queue length (stream 7)", "Memcpy DtoH bandwidth").
using RankCounters = std::map<std::string, std::vector<CounterPoint>>;

// HTA's memory kernel type of a copy or set: "Memset", the first 11 characters of a "Memcpy ..."
// name ("Memcpy DtoH"), else "Memcpy Unknown".
std::string MemoryKernelKind(std::string_view name);

// Steps (time, change) in any order into the value after each distinct time, as HTA's cumulative
// sum over steps in time order gives it (a value within 1e-9 of 0 is 0).
std::vector<CounterPoint> CumulativeSeries(std::vector<std::pair<double, double>> steps);

class CounterTracksBuilder {
 public:
  void Add(const KinetoEvent& event);
  // Each rank's counters not yet written, by rank.
  std::map<int, RankCounters> Series() const;
  // Writes `rank`'s counter tracks (the merge has read its trace) and lets its events go.
  void WriteRank(int rank, MergedTraceFile& out);

 private:
  struct Activity {
    double ts, end;
    int64_t stream;
    int64_t correlation;
    double memory_bw_gbps;  // copies and sets (0 when the trace gives none); -1 otherwise
    int32_t memory_kind;    // HTA's memory kernel type ("Memcpy DtoH", "Memset") in kinds_; -1
                            // none
  };
  struct Rank {
    std::unordered_map<int64_t, double> launch_ts;  // launch call start, by correlation
    std::vector<Activity> activities;
  };
  RankCounters RankSeries(const Rank& data) const;

  std::map<int, Rank> ranks_;
  NameTable kinds_;
};

}  // namespace dtrain
