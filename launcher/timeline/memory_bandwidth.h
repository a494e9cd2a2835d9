// The bandwidth of a rank's memory copies and sets, as HolisticTraceAnalysis 0.5 summarises it
// (get_memory_bw_summary): per kind ("Memcpy HtoD", "Memcpy DtoH", "Memcpy DtoD", "Memset"), the
// GB/s of the copies of that kind in flight (each copy's Kineto "memory bandwidth (GB/s)",
// summed) at each point where it changes, the points at 0 left out, described as pandas'
// describe() does: count, mean, standard deviation of a sample, min, quartiles, max. A kind whose
// copies run one at a time has one point per copy, its bandwidth; copies that overlap add a point
// at their sum. The points are not weighted by how long each value lasted (HTA's choice): a long
// slow copy counts as much as a short fast one.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/counter_tracks.h"

namespace dtrain {

struct MemoryBandwidth {
  std::string kind;    // HTA's memory kernel type (MemoryKernelKind)
  int64_t points = 0;  // changes of the series to a value above 0
  double mean = 0, std = -1, min = 0, p25 = 0, p50 = 0, p75 = 0,
         max = 0;  // GB/s; std -1: one point
};

// One copy or set: its kind (MemoryKernelKind), start and end (µs; a copy of no time lasts 1 µs,
// as HTA takes it), and its GB/s (0 where the trace gives none).
struct MemoryCopy {
  std::string kind;
  double start, end;
  double gbps;
};

// Per kind, the GB/s of its copies in flight from each point where that changes on (HTA's memory
// bandwidth time series), by kind name: what the counter tracks draw and the summary describes.
std::map<std::string, std::vector<CounterPoint>> MemoryBandwidthSeries(
    const std::vector<MemoryCopy>& copies);

// Per kind that has a point above 0, by kind name.
std::vector<MemoryBandwidth> SummarizeMemoryBandwidth(const std::vector<MemoryCopy>& copies);

// The table of `dtrain timeline --summary` (empty when no rank has a point), and one rank's list
// for --json.
std::string FormatMemoryBandwidth(const std::map<int, std::vector<MemoryBandwidth>>& by_rank);
nlohmann::json MemoryBandwidthJson(const std::vector<MemoryBandwidth>& kinds);

}  // namespace dtrain
