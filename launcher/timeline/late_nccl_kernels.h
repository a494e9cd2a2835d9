// The ranks whose GPUs reach the job's collectives last, from PyTorch profiler traces, as
// HolisticTraceAnalysis 0.5's get_potential_stragglers finds them: a collective ends at about the
// same time on every rank, so the rank whose NCCL kernel starts latest keeps the others waiting.
// Per rank and profiler step (not the first, as HTA leaves step 0 out, nor the last, which HTA
// drops on loading), the last run of each NCCL kernel on each stream that takes at least 1% of the
// mean step time; of those (stream, kernel) pairs, the one whose run's length differs most between
// ranks (the standard deviation over ranks, averaged over the steps); per step, the ranks among
// the `candidates` latest to start it; HTA's potential stragglers are the `candidates` ranks that
// were so in the most steps.
//
// The GPU's own clock, not the CPU's: a rank's CPU enqueues a collective long before its GPU gets
// to it, so a slow GPU shows here and not in when ranks called the collective
// (collective_arrivals.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/name_table.h"

namespace dtrain {

// One rank of the comparison.
struct LateKernelRank {
  int rank = 0;
  int steps_latest = 0;       // steps where it was among the candidates latest to start the kernel
  int steps = 0;              // steps where it ran the kernel
  double mean_behind_ms = 0;  // its start after the earliest rank's, averaged over those steps
};

struct LateNcclKernels {
  std::string kernel;  // the NCCL kernel compared; empty: no NCCL kernel on two ranks or more
  int stream = -1;
  int candidates = 0;                 // HTA's num_candidates
  int steps = 0;                      // profiler steps compared
  double mean_step_ms = 0;            // HTA's mean step time (the 1% threshold's base)
  std::vector<int> stragglers;        // HTA's answer: at most `candidates` ranks, most steps first
  std::vector<LateKernelRank> ranks;  // every rank that ran it, most steps latest first
};

class LateNcclKernelBuilder {
 public:
  // HTA's num_candidates default.
  static constexpr int kCandidates = 2;
  // HTA's min_normalized_duration: a kernel shorter than this share of the mean step time is left
  // out.
  static constexpr double kMinStepShare = 0.01;

  // Profiler step `step` of a rank (ProfilerStep#<step>), one HTA keeps, from `start_us` to
  // `end_us`; and `end_us` of each GPU activity launched in such a step: together they make HTA's
  // mean step time (from the first step's start to the last end of what the steps ran, over the
  // number of steps).
  void AddStep(int step, double start_us, double end_us);
  void AddActivityEnd(double end_us);
  // An NCCL kernel of `rank` launched in profiler step `step`.
  void AddKernel(int rank, int step, int stream, std::string_view name, double start_us,
                 double end_us);
  LateNcclKernels Finish(int candidates = kCandidates) const;

 private:
  struct Run {
    int rank, step, stream;
    uint32_t name;
    double start_us, end_us;
  };
  std::vector<Run> runs_;
  std::map<int, bool> steps_;  // every step number kept on some rank
  double first_start_us_ = 1e300, last_end_us_ = -1e300;
  NameTable names_;
};

// The step number of a "ProfilerStep#N" name (HTA's pattern, spaces allowed around '#'); -1 if
// it is not one.
int ProfilerStepNumber(std::string_view name);

// The summary's section ("" when no kernel was compared), and its JSON.
std::string FormatLateNcclKernels(const LateNcclKernels& late);
nlohmann::json LateNcclKernelsJson(const LateNcclKernels& late);

}  // namespace dtrain
