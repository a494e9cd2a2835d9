// How long the GPU spent in each record_function region, per rank, from the PyTorch profiler
// traces' GPU user annotations (the span Kineto draws on a GPU stream from the first to the last
// activity a region launched), as HolisticTraceAnalysis' get_gpu_user_annotation_breakdown sums
// them: per name, its count, total, mean, shortest, longest and standard deviation (that of a
// sample, 0 for one).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/kineto_trace.h"
#include "launcher/timeline/running_stats.h"

namespace dtrain {

struct AnnotationTime {
  std::string name;
  int64_t count = 0;
  double sum_us = 0, mean_us = 0, min_us = 0, max_us = 0, std_us = 0;
};

// One rank's regions, most time first.
struct RankAnnotations {
  int rank = 0;
  std::vector<AnnotationTime> regions;
};

class GpuAnnotationBreakdownBuilder {
 public:
  void Add(const KinetoEvent& event);
  // The ranks whose traces have GPU annotations, by rank.
  std::vector<RankAnnotations> Finish() const;

 private:
  std::map<int, std::map<std::string, RunningStats, std::less<>>> ranks_;
};

// The summary's section (per rank the regions with the most GPU time, step annotations left out:
// the steps have their own table), and its JSON (every region).
std::string FormatGpuAnnotations(const std::vector<RankAnnotations>& ranks);
nlohmann::json GpuAnnotationsJson(const std::vector<RankAnnotations>& ranks);

}  // namespace dtrain
