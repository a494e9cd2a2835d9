// Where each rank's GPU time went, from PyTorch profiler traces: busy time split into compute,
// communication and memory kernels as HolisticTraceAnalysis's temporal breakdown splits it, idle
// time and its causes, the launch queue, communication hidden behind compute, per-step times, the
// top kernels, the kernel breakdown (gpu_kernel_breakdown.h), the kernels each ATen operator
// launches (aten_op_launches.h), and per collective the rank that arrived last
// (collective_arrivals.h). Built event by
// event during the streaming merge; memory grows with the number of GPU activities, ATen
// operators and collectives (a few dozen bytes each), not with the trace text.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/aten_op_launches.h"
#include "launcher/timeline/collective_arrivals.h"
#include "launcher/timeline/gpu_idle_causes.h"
#include "launcher/timeline/gpu_kernel_breakdown.h"
#include "launcher/timeline/gpu_speed_compare.h"
#include "launcher/timeline/kineto_trace.h"
#include "launcher/timeline/late_nccl_kernels.h"
#include "launcher/timeline/launch_queue.h"
#include "launcher/timeline/memory_bandwidth.h"
#include "launcher/timeline/name_table.h"
#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/trace_diff.h"

namespace dtrain {

// One rank's GPU time over its span (first activity start to last activity end). The categories
// are exclusive, compute first, then communication, memory, other:
// compute + communication + memcpy + other = busy; busy + idle = span.
struct GpuTime {
  double span_ms = 0;
  double busy_ms = 0;
  double compute_ms = 0;
  double communication_ms = 0;        // communication kernels while no compute kernel runs
  double communication_total_ms = 0;  // communication kernels, overlapped or not
  double memcpy_ms = 0;               // memcpy/memset while neither of the above runs
  double other_ms = 0;                // kernels HTA counts as neither (e.g. *Sync*)
  double idle_ms = 0;
  double overlap_pct = -1;  // communication overlapped by compute, % of communication; -1: none
};

// One step (a ProfilerStep#N span, or a record_function the user named) on one rank.
struct GpuStep {
  std::string name;
  double start_ms = 0;  // merged clock
  double duration_ms = 0;
  double gpu_busy_ms = 0;
  double gpu_compute_ms = 0;
};

struct RankGpuTime {
  int rank = 0;
  std::string host;
  GpuTime gpu;
  int64_t activities = 0;  // GPU activities counted (HTA leaves out the last profiler step's)
  std::vector<GpuStep> steps;
};

struct KernelTotal {
  std::string name;
  GpuActivityKind kind = GpuActivityKind::kCompute;
  int64_t count = 0;
  double total_ms = 0;
  double max_us = 0;
};

struct GpuTimeSummary {
  std::vector<RankGpuTime> ranks;                         // by rank; PyTorch traces only
  std::map<int, GpuIdleCauses> idle_causes;               // why each of those ranks' GPU sat idle
  std::map<int, std::vector<StreamQueue>> launch_queues;  // how far ahead each rank's CPU launched
  std::map<int, std::vector<MemoryBandwidth>> memory_bandwidth;  // each rank's copies, by kind
  std::vector<RankSpeed> speeds;         // each rank's GPU against the others at the same work
  std::map<int, RankOps> operators;      // what each rank ran, by name (builder's `operators`)
  std::vector<KernelTotal> top_kernels;  // most total time first, at most kTopKernels
  GpuKernelBreakdown kernel_breakdown;   // kernel time by type, and per rank by kernel
  std::vector<RankAtenOpKernels> aten_ops;     // the kernels each ATen operator launches, per rank
  std::vector<CollectiveArrival> collectives;  // in order of first arrival
  std::vector<CollectiveStraggler> stragglers;  // most often last first
  LateNcclKernels late_gpus;                    // the ranks whose GPU starts collectives last
  std::string step_name;                       // what a step is
  static constexpr size_t kTopKernels = 10;
};

class GpuTimeSummaryBuilder {
 public:
  // `step_name`: the record_function that marks one step; empty: ProfilerStep#N.
  // `operators`: also keep what each rank ran by name (GpuTimeSummary::operators), for a
  // comparison with another run; it keeps a rank's CPU operators until that rank is summed up.
  // `straggler_candidates`: how many ranks the late GPUs name (HTA's num_candidates).
  explicit GpuTimeSummaryBuilder(std::string step_name = "", bool operators = false,
                                 int straggler_candidates = LateNcclKernelBuilder::kCandidates);
  void Add(const KinetoEvent& event);
  // Sums up `rank`, whose events have all been added, and lets them go: a merge calls it as it
  // finishes reading each rank, so that one rank's activities are held at a time, not every
  // rank's until Finish. Finish sums up the ranks left.
  void EndRank(int rank);
  GpuTimeSummary Finish(const std::vector<RankTraceInfo>& ranks);

 private:
  struct Activity {
    double start;
    double end;
    int64_t correlation;
    uint32_t name;
    int32_t stream;
    GpuActivityKind kind;
    bool marker = false;  // a stream synchronisation record: it bounds the span, no GPU work
  };
  struct Span {
    double start;
    double end;
    uint32_t name;
  };
  // The CPU side of one correlation id: its earliest event, and the call that launched the GPU
  // activity, where one of its events is a launch call.
  struct Launch {
    double earliest_us;
    double call_start_us = 0;
    double call_duration_us = 0;
    LaunchCallKind call = LaunchCallKind::kNone;
  };
  struct RankState {
    std::vector<Activity> activities;
    std::unordered_map<int64_t, Launch> launches;    // by correlation id
    std::unordered_map<size_t, int64_t> copy_bytes;  // a memcpy's bytes, by its index in activities
    std::unordered_map<size_t, double> copy_gbps;    // a copy's or set's GB/s (0: none), likewise
    double last_profiler_step_us = -1e300;
    std::set<uint32_t> profiler_step_names;  // interned; HTA filters with two or more
    std::vector<Span> steps;
    std::vector<Span> profiler_steps;  // the CPU's ProfilerStep#N spans (by start once swept)
    std::vector<Span> cpu_operators;   // cpu_op events (with `operators_`)
  };

  uint32_t Intern(std::string_view name) { return names_.Intern(name); }
  RankGpuTime Sweep(int rank, RankState& state, GpuIdleCauses& causes,
                    std::vector<StreamQueue>& queues, std::vector<MemoryBandwidth>& bandwidth,
                    RankOps* operators);
  RankOps CollectOperators(int rank, RankState& state);
  // The span of `by_start` (sorted by start, none overlapping) that holds `ts`; nullptr if none.
  static const Span* SpanAt(const std::vector<Span>& by_start, double ts);

  std::string step_name_;
  bool operators_ = false;
  int straggler_candidates_ = LateNcclKernelBuilder::kCandidates;
  std::map<int, RankState> ranks_;    // ranks still being read
  std::map<int, RankGpuTime> swept_;  // ranks summed up (EndRank)
  GpuTimeSummary summary_;            // their idle causes, launch queues and operators
  NameTable names_;
  std::map<uint32_t, KernelTotal> kernels_;
  GpuKernelBreakdownBuilder kernel_breakdown_;
  AtenOpLaunchBuilder aten_ops_;
  LateNcclKernelBuilder late_gpus_;
  // Per rank, each collective's name and start (collective_arrivals.h).
  std::map<int, std::vector<std::pair<uint32_t, double>>> collective_starts_;
  // Per rank, the work that GpuSpeed compares: compute kernels, copies to and from the GPU.
  std::map<int, RankWork> compute_work_, to_gpu_work_, from_gpu_work_;
};

std::string FormatGpuTimeSummary(const GpuTimeSummary& summary);
nlohmann::json GpuTimeSummaryJson(const GpuTimeSummary& summary);

}  // namespace dtrain
