// How far ahead of each stream the CPU launched work, from a rank's PyTorch profiler trace, as
// HolisticTraceAnalysis 0.5's trace counters measure it (get_queue_length_summary,
// get_time_spent_blocked_on_full_queue): a stream's queue grows by one when a launch call starts
// and shrinks by one when the activity it launched starts on the GPU. A queue near 0 means the
// GPU ran each kernel as soon as the CPU launched it (the CPU sets the pace); a queue at CUDA's
// limit (kCudaLaunchQueueLength) means the CPU waited for room to launch more.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/gpu_idle_causes.h"

namespace dtrain {

// The launches a stream holds before the next launch call blocks (HTA's
// CUDA_MAX_LAUNCH_QUEUE_PER_STREAM).
constexpr int kCudaLaunchQueueLength = 1024;

// One stream's queue, over the points where its length changed (two per launch), as HTA's
// summary takes them: the mean and largest length, and the time spent at `full_length` or more.
struct StreamQueue {
  int64_t stream = 0;
  int64_t points = 0;
  double mean = 0;
  int64_t max = 0;
  double full_us = 0;
};

// Every stream with a launched activity, by stream number. Activities without a launch call
// (LaunchCallKind::kNone) are not counted; the driver's launches are.
std::vector<StreamQueue> LaunchQueueByStream(const std::vector<LaunchedActivity>& activities,
                                             int full_length = kCudaLaunchQueueLength);

// The table of `dtrain timeline --summary`: per rank, the streams with at least 5% of its launches
// (most first, at most four), and a line naming the streams whose queue was ever full.
std::string FormatLaunchQueues(const std::map<int, std::vector<StreamQueue>>& by_rank);
nlohmann::json LaunchQueueJson(const std::vector<StreamQueue>& queues);

}  // namespace dtrain
