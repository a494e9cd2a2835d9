// Why a rank's GPU sat idle, from its PyTorch profiler trace, as HolisticTraceAnalysis 0.5
// answers it: each stream's gaps between activities sorted by cause (get_idle_time_breakdown),
// and how long the CPU took to launch the work and the GPU to start it
// (get_cuda_kernel_launch_stats). Times are µs on the merged clock.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/kineto_trace.h"

namespace dtrain {

// HTA's defaults: a gap under kKernelWaitUs between two activities of a stream is the cost of
// launching back to back (consecutive_kernel_delay, in the trace's µs); a launch delay over
// kLaunchDelayCutoffUs and a launch call over kLaunchCallCutoffUs are outliers.
constexpr double kKernelWaitUs = 30;
constexpr double kLaunchDelayCutoffUs = 100;
constexpr double kLaunchCallCutoffUs = 50;

// One GPU activity (kernel, memcpy, memset) and the CPU side that launched it.
struct LaunchedActivity {
  int64_t stream = 0;
  double start = 0;
  double end = 0;
  // The earliest CPU-side event with the activity's correlation; NaN when there is none.
  double launched_at = std::numeric_limits<double>::quiet_NaN();
  // The launch call itself (ClassifyLaunchCall), when one has the activity's correlation.
  LaunchCallKind call = LaunchCallKind::kNone;
  double call_start = 0;
  double call_duration = 0;
};

// One stream's idle time: each gap between an activity and the one before it on the stream is
// host wait when the next one was launched after the previous one ended (the CPU was late),
// else kernel wait when it is shorter than kKernelWaitUs, else other (waiting on another
// stream, a collective or an event).
struct StreamIdle {
  int64_t stream = 0;
  int64_t activities = 0;
  double span_us = 0;  // first start to last end on the stream
  double busy_us = 0;  // the activities' durations added
  double host_wait_us = 0;
  double kernel_wait_us = 0;
  double other_us = 0;
  double idle_us() const { return host_wait_us + kernel_wait_us + other_us; }
};

// The activities launched by a launch call: the CPU's time in the call, and the launch delay
// (the activity's start less the call's end, never below 0).
struct KernelLaunches {
  int64_t launches = 0;         // activities matched with their launch call
  int64_t driver_launches = 0;  // of which by the driver's cuLaunchKernel(Ex)
  double delay_median_us = 0;
  double delay_max_us = 0;
  int64_t delayed = 0;            // launch delay over kLaunchDelayCutoffUs
  int64_t slow_calls = 0;         // launch call over kLaunchCallCutoffUs
  int64_t shorter_than_call = 0;  // the GPU ran it in less time than the CPU took to launch it
};

// Every stream's idle time, by stream number.
std::vector<StreamIdle> IdleByStream(std::vector<LaunchedActivity> activities);
KernelLaunches LaunchStats(const std::vector<LaunchedActivity>& activities);

// Both, for one rank.
struct GpuIdleCauses {
  std::vector<StreamIdle> streams;
  KernelLaunches launches;
};
GpuIdleCauses FindGpuIdleCauses(std::vector<LaunchedActivity> activities);

// The two tables of `dtrain timeline --summary`, ranks in order, and what they point to. Streams
// with under 5% of a rank's GPU work are counted, not listed.
std::string FormatGpuIdleCauses(const std::map<int, GpuIdleCauses>& by_rank);
// {"idle_by_stream": [every stream], "launches": {...}}, for a rank's entry in --json.
nlohmann::json GpuIdleCausesJson(const GpuIdleCauses& causes);

}  // namespace dtrain
