// Which kernels each ATen operator launches, and how long the launches take, from PyTorch profiler
// traces, as HolisticTraceAnalysis 0.5's get_aten_op_kernels_and_delay finds them: each kernel
// launch call (HTA's pattern: cuda*LaunchKernel*, cuLaunchKernel*, runFunction*) belongs to the
// ATen operator (cpu_op named aten::*) that started last among those that span the whole call,
// on any thread; per operator run, its launches in order make a kernel sequence; per operator
// name and kernel sequence: how often, the mean time from the operator's start to its first
// launch (the CPU's dispatch before the GPU hears of it), and the mean time from that launch to
// its kernel's start on the GPU. A launch whose kernel is not in the trace is left out (HTA 0.5
// stops with an error there). The events counted are HTA's: with two profiler steps or more,
// those that begin before the last one does.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/name_table.h"

namespace dtrain {

struct AtenOpKernels {
  std::string op;                  // "aten::mm"
  std::string kernels;             // the kernel names, in launch order, joined by " -> "
  int64_t count = 0;               // operator runs that launched this sequence
  double op_to_launch_us = 0;      // mean: the operator's start to its first launch call's
  double launch_to_kernel_us = 0;  // mean: that call's start to its kernel's start
};

// One rank's sequences, the most frequent first.
struct RankAtenOpKernels {
  int rank = 0;
  std::vector<AtenOpKernels> sequences;
};

// True for a launch call as HTA's kernel launch pattern matches names.
bool IsHtaKernelLaunchCall(std::string_view name);

class AtenOpLaunchBuilder {
 public:
  // The GPU activity a launch call's correlation id names: its name and start; false when the
  // trace has none.
  using KernelOf = std::function<bool(int64_t correlation, std::string_view* name, double* start)>;

  // An aten:: operator (on any thread); a launch call.
  void AddOp(int rank, std::string_view name, double start_us, double end_us);
  void AddLaunch(int rank, int64_t correlation, double start_us, double end_us);
  // Matches `rank`'s launches with their operators and (through `kernel_of`) their kernels,
  // counting only the operators and launches that begin before `cutoff_us`, and lets its events
  // go. The rank's GPU activities are the caller's, kept only until then.
  void EndRank(int rank, const KernelOf& kernel_of,
               double cutoff_us = std::numeric_limits<double>::infinity());
  std::vector<RankAtenOpKernels> Finish();

 private:
  struct Op {
    double start, end;
    uint32_t name;
  };
  struct Launch {
    double start, end;
    int64_t correlation;
  };
  struct RankState {
    std::vector<Op> ops;
    std::vector<Launch> launches;
  };
  std::map<int, RankState> ranks_;
  std::vector<RankAtenOpKernels> done_;
  NameTable names_;
};

// The summary's section: the lowest rank's most frequent sequences (HTA's default rank); --json
// has every rank's.
std::string FormatAtenOpKernels(const std::vector<RankAtenOpKernels>& ranks);
nlohmann::json AtenOpKernelsJson(const std::vector<RankAtenOpKernels>& ranks);

}  // namespace dtrain
