// Frequent CUDA kernel sequences (`dtrain timeline --summary --kernel-sequences OPERATOR`), as
// HolisticTraceAnalysis 0.5's get_frequent_cuda_kernel_sequences finds them: the CPU events whose
// names contain OPERATOR, at the shallowest call depth any of them has on its thread, that put at
// least `min_pattern_len` GPU activities on the GPU (theirs and their callees', matched to their
// launches by correlation id); each one's pattern is its name and those activities' names in the
// order they started on the GPU. Per pattern: how often it ran, its GPU activities' summed time
// and the operators' summed time, the most frequent first. The sequences that repeat are where a
// fused kernel (or a CUDA graph) would save launches. As HTA writes a copy of the trace with the
// top patterns marked, the merged trace gets a track marking their runs.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/kineto_trace.h"
#include "launcher/timeline/merged_trace_file.h"
#include "launcher/timeline/name_table.h"

namespace dtrain {

struct KernelSequence {
  std::string op;                    // the CPU event's name
  std::vector<std::string> kernels;  // its GPU activities, in the order they started
  int64_t count = 0;
  double gpu_us = 0;  // the activities' durations, summed over every run
  double cpu_us = 0;  // the CPU event's duration, summed over every run
  struct Run {        // one run, on the merged clock: the CPU event; its first to last activity
    double cpu_start, cpu_end, gpu_start, gpu_end;
  };
  std::vector<Run> runs;  // for the merged trace's overlay (not in the JSON)
};

struct RankKernelSequences {
  int rank = 0;
  int depth = -1;                         // the call depth of the events counted (-1: none matched)
  std::vector<KernelSequence> sequences;  // most frequent first, then by pattern
};

// What --kernel-sequences asked for and found.
struct KernelSequences {
  std::string operator_name;
  int min_pattern_len = 3;
  std::vector<RankKernelSequences> ranks;  // by rank
};

class KernelSequenceBuilder {
 public:
  KernelSequenceBuilder(std::string operator_name, int min_pattern_len);
  void Add(const KinetoEvent& event);
  // Finds `rank`'s sequences and lets its events go; what it found (nullptr: nothing of the
  // rank's was here), valid until the next call.
  const RankKernelSequences* EndRank(int rank);
  KernelSequences Finish();

 private:
  struct CpuEvent {
    double start, end;
    int thread;
    uint32_t name;
    int64_t correlation;
  };
  struct GpuActivity {
    double start, dur;
    uint32_t name;
  };
  struct Launched {  // what one correlation id put on the GPU (a graph launch: many activities)
    std::vector<GpuActivity> activities;
    bool linked = false;  // to the first CPU event carrying the id
  };
  struct RankState {
    std::vector<CpuEvent> cpu;
    std::unordered_map<int64_t, Launched> gpu;  // by correlation
    std::set<int> gpu_tracks;                   // tracks with GPU activity: not the CPU's
    std::set<uint32_t> profiler_steps;          // the names of ProfilerStep#N
    double last_profiler_step_us = -std::numeric_limits<double>::infinity();
  };
  std::string operator_name_;
  int min_pattern_len_;
  std::map<int, RankState> ranks_;
  std::vector<RankKernelSequences> done_;
  NameTable names_;
};

// The lowest rank's `top` most frequent patterns (HTA's default rank and top_k); that none were
// found when no rank has one. The JSON has every rank's, each pattern whole.
std::string FormatKernelSequences(const KernelSequences& found, size_t top = 5);
nlohmann::json KernelSequencesJson(const KernelSequences& found);

// The track of the overlay in each rank's process of the merged trace (beside the critical
// path's).
constexpr int kKernelSequencesTrack = 99998;

// Marks the runs of the rank's `top` most frequent patterns in the merged trace, as HTA's copy of
// the trace marks them: a track "kernel sequences: OPERATOR" in the rank's process with a slice
// per run over its CPU event, named "#K OPERATOR-NAME (COUNT runs)", args: pattern (its index,
// from 1), count, kernels (how many), gpu_first_to_last_us (its first activity's start to its last
// one's end). Nothing when the rank has none.
void WriteKernelSequenceOverlay(const RankKernelSequences& rank, const std::string& operator_name,
                                MergedTraceFile& out, size_t top = 5);
}  // namespace dtrain
