// The critical path of one profiled step on each rank, from its PyTorch profiler trace, built as
// HolisticTraceAnalysis 0.5's critical path analysis builds it (CPGraph): a graph whose nodes are
// the starts and ends of the step's CPU operators, CUDA calls and GPU activities, whose edges are
// the time spent in them, the launch of a kernel, the gap between two kernels on a stream and the
// waits of synchronisation, and whose longest path is the chain of work that set the step's
// length. Each stretch of it is bound by the CPU, GPU compute, GPU communication, a gap between
// kernels or a kernel's launch: what to make faster to make the step shorter.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/critical_path_graph.h"
#include "launcher/timeline/kineto_trace.h"
#include "launcher/timeline/name_table.h"

namespace dtrain {

// What a stretch of the critical path waits on (HTA's bound_by).
enum class PathBound : uint8_t {
  kCpu,               // a CPU operator or CUDA call (cpu_bound)
  kGpuCompute,        // a kernel, copy or set that is not communication (gpu_compute_bound)
  kGpuCommunication,  // an NCCL kernel (gpu_communication_bound)
  kKernelGap,         // a stream idle between two kernels (gpu_kernel_kernel_overhead)
  kLaunchDelay,       // from a launch call to its kernel's start (gpu_kernel_launch_overhead)
};
constexpr size_t kPathBounds = 5;
// HTA's name of a bound: "cpu_bound", ...
const char* PathBoundName(PathBound bound);
// What a stretch bound so waits on, named after `name` (the event PathStretch names): the
// operator, call or activity itself; "stream idle after NAME"; "launch of NAME".
std::string PathWaitText(PathBound bound, const std::string& name);

// One piece of work on the critical path, summed over its times on it.
struct PathStretch {
  std::string name;  // the operator, call or GPU activity; a gap: the activity before it
  PathBound bound = PathBound::kCpu;
  double us = 0;
  int count = 0;
};

// One edge of the path, where the merged trace shows it.
struct PathLink {
  PathEdgeType type = PathEdgeType::kOperator;
  std::optional<PathBound> bound;  // none: a dependency or synchronisation (weighs nothing)
  std::string name;                // as in PathStretch
  double from_us = 0, to_us = 0;   // the times of its two nodes (merged clock)
  double weight_us = 0;
  // Where an arrow of the edge binds in the merged trace: the track (tid in the rank's process)
  // and a time inside the event of each node (its start, or its end; a GPU record's end less up to
  // 1 µs, as HTA's overlay places it).
  int from_track = -1, to_track = -1;
  double from_at_us = 0, to_at_us = 0;
};

// One rank's critical path through one step.
struct RankCriticalPath {
  int rank = 0;
  std::string step;     // the step's record_function ("ProfilerStep#4")
  int step_index = -1;  // among the rank's profiled steps, in time order (0: the first)
  int steps = 0;        // the rank's profiled steps
  double step_us = 0;
  double path_us = 0;  // the critical path's length (CPU gaps between top-level operators and
                       // waits of synchronisation count nothing, as in HTA)
  std::array<double, kPathBounds> bound_us{};
  std::vector<PathStretch> stretches;  // most time first, at most 8
  std::vector<PathLink> links;         // the whole path, edge by edge in order
  int nodes = 0;
  int edges = 0;
  bool sync_events = false;  // the trace records CUDA synchronisation (cuda_sync) events
  std::string note;          // why there is no path (no such step); empty when there is one
};

// Collects what the critical paths need from every rank's trace as the merge reads it, and
// builds each rank's path once its events are all in: at EndRank (the merge's end of a rank's
// trace), when the next rank's first event comes, or at Finish. A rank's events are let go once its
// path is built.
class CriticalPathBuilder {
 public:
  // `step_name`: the record_function of one step ("": ProfilerStep#N). `which`: "slowest" (each
  // rank's longest step), a step's index among each rank's profiled steps (0: the first, as HTA's
  // instance_id), or a step's name ("ProfilerStep#4").
  CriticalPathBuilder(std::string step_name, std::string which);

  void Add(const KinetoEvent& event);
  // The path of the rank whose events came last, built now; null when no events are pending.
  const RankCriticalPath* EndRank();
  // One path per rank that had profiler events, by rank.
  std::vector<RankCriticalPath> Finish();

  struct Step {
    double ts, end;
    uint32_t name;
  };

 private:
  void BuildRank();
  RankCriticalPath Build(int rank, std::vector<PathEvent>& events, std::vector<Step>& steps) const;

  std::string step_name_;
  std::string which_;
  NameTable names_;
  int rank_ = -1;  // whose events are being collected
  std::vector<PathEvent> events_;
  std::vector<Step> steps_;
  std::map<int, RankCriticalPath> paths_;
};

// The section of `dtrain timeline --summary --critical-path`, and its JSON
// (critical_path_report.cpp).
std::string FormatCriticalPaths(const std::vector<RankCriticalPath>& paths);
nlohmann::json CriticalPathsJson(const std::vector<RankCriticalPath>& paths);

}  // namespace dtrain
