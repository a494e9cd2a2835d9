// Which rank's GPU is slower than its peers at the same work, from PyTorch profiler traces: the
// compute kernels every rank ran, and the copies between host and GPU, timed on each rank against
// the median rank. In data-parallel training every rank runs the same kernels on the same shapes,
// so a GPU held at lower clocks (power, heat, a fault) takes longer for each, and a PCIe link
// trained below its width or speed copies at a fraction of the others' rate, while waiting on
// other ranks (collectives) and on the CPU (launches) stays out of these figures.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain {

// Activities that did the same work on one rank (a compute kernel by name; a copy by name and
// size): their durations, and the bytes each moved (copies).
struct SameWork {
  std::vector<double> durations_us;
  int64_t bytes = 0;
};
// A rank's work of one kind (compute kernels, or copies one way), by what it was.
using RankWork = std::map<std::string, SameWork>;

// A rank's speed at one kind of work, against the median rank. Each work's time on a rank is its
// median duration there (so that a kernel stretched once, by another process's time slice on a
// shared GPU, does not count), times how often the rank ran it. `ratio`: the rank's time for
// the work every rank did over the time at the median rank's durations (1.25: 25% longer).
struct WorkSpeed {
  double ratio = -1;   // -1: no work of the kind that every rank did
  int kinds = 0;       // the works (kernels by name, copies by name and size) every rank ran
  int64_t count = 0;   // how many activities of them the rank ran
  int64_t bytes = 0;   // and the bytes they moved (copies)
  double time_us = 0;  // their count times their median duration, added
  double gigabytes_per_second() const { return time_us > 0 ? bytes / time_us / 1000.0 : 0; }
};

struct RankSpeed {
  int rank = 0;
  WorkSpeed compute;   // compute kernels
  WorkSpeed to_gpu;    // Memcpy HtoD
  WorkSpeed from_gpu;  // Memcpy DtoH
};

// A rank is pointed out as slow from these ratios on.
constexpr double kSlowComputeRatio = 1.10;
constexpr double kSlowCopyRatio = 1.50;

// The three kinds of work per rank (ranks as keys in each map). The median of an even number of
// ranks is the faster of the two middle ones, so that of two ranks the slower one stands out.
std::vector<RankSpeed> CompareGpuSpeed(const std::map<int, RankWork>& compute,
                                       const std::map<int, RankWork>& to_gpu,
                                       const std::map<int, RankWork>& from_gpu);

// The table of `dtrain timeline --summary` (two ranks or more) and a line per slow rank saying
// what to check; `hosts`: rank -> host, where known.
std::string FormatGpuSpeed(const std::vector<RankSpeed>& speeds,
                           const std::map<int, std::string>& hosts);
// {"compute_ratio", "compute_kernels", "to_gpu_gbps", "to_gpu_ratio", "from_gpu_gbps",
// "from_gpu_ratio"}, null where not known.
nlohmann::json GpuSpeedJson(const RankSpeed& speed);

}  // namespace dtrain
