// Two runs of the same training, compared operator by operator, as HolisticTraceAnalysis's
// TraceDiff compares them (compare_traces, ops_diff): what one rank's profiled steps ran on the
// GPU (kernels, copies, stream records) and on the CPU (operators), by name, how often and for
// how long, per step. `dtrain timeline --summary --against OTHER` prints it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain {

struct OpTotal {
  int64_t count = 0;
  double total_us = 0;
};

// What one rank ran in its profiled steps (the ProfilerStep#N spans, all of them, as HTA's
// TraceDiff takes them): GPU activity launched in them and CPU operators (cpu_op) that start in
// them. Without profiler steps, the whole trace is one step.
struct RankOps {
  int rank = 0;
  int steps = 0;
  double steps_us = 0;  // the steps' durations added
  std::map<std::string, OpTotal> gpu;
  std::map<std::string, OpTotal> cpu;
};

// One name whose count or time per step changed (or did not).
struct OpChange {
  std::string name;
  bool gpu = true;
  OpTotal before, after;          // over all the steps compared
  double before_per_step_us = 0;  // total / steps
  double after_per_step_us = 0;
  double delta_per_step_us() const { return after_per_step_us - before_per_step_us; }
};

struct TraceDiff {
  std::string against;  // what the run here is compared with
  int rank_before = 0, rank_after = 0;
  int steps_before = 0, steps_after = 0;
  double step_ms_before = 0, step_ms_after = 0;  // mean step
  std::vector<OpChange> changes;                 // every name, largest change per step first
  // HTA's ops_diff: names only there, only here, run more often here, less often, as often.
  int added = 0, deleted = 0, increased = 0, decreased = 0, unchanged = 0;
};

// `after`: the run here; `before`: the one it is compared with.
TraceDiff DiffRankOps(const RankOps& before, const RankOps& after, const std::string& against);

// The section of `dtrain timeline --summary`: the mean step, then the GPU names and the CPU
// operators whose time per step changed most.
std::string FormatTraceDiff(const TraceDiff& diff);
nlohmann::json TraceDiffJson(const TraceDiff& diff);

}  // namespace dtrain
