// A rank's trace (dtrain-clip's or Horovod's array, PyTorch's Kineto object, gzip or not) through
// the streaming reader, the merge and both summaries (the GPU one with its idle causes, speeds
// and operators, formatted as text and JSON), the slowest step's critical path with its overlay,
// the counter tracks, the GPU time by region and the frequent kernel sequences (of every CPU event,
// with their overlay): a merged file or a dtrain::Error naming the file —
// never "internal error".
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "launcher/error.h"
#include "launcher/timeline/counter_tracks.h"
#include "launcher/timeline/critical_path.h"
#include "launcher/timeline/critical_path_overlay.h"
#include "launcher/timeline/gpu_annotation_breakdown.h"
#include "launcher/timeline/gpu_time_summary.h"
#include "launcher/timeline/kernel_sequences.h"
#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/timeline_summary.h"
#include "launcher/timeline/trace_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = dtrain::fuzz::WriteInput("rank-1.json", data, size);
  try {
    dtrain::TraceReader reader(path);
    nlohmann::json record;
    while (reader.Next(record)) {
    }
  } catch (const dtrain::Error&) {
  } catch (const nlohmann::json::exception&) {  // Next parses; NextText is what the merge uses
  }
  try {
    dtrain::TimelineSummaryBuilder builder;
    dtrain::GpuTimeSummaryBuilder gpu("", /*operators=*/true);
    dtrain::CriticalPathBuilder paths("", "slowest");
    dtrain::CounterTracksBuilder counters;
    dtrain::GpuAnnotationBreakdownBuilder regions;
    dtrain::KernelSequenceBuilder sequences("", 1);  // "" is in every name
    dtrain::MergeResult result = dtrain::MergeTimelines(
        {path}, dtrain::fuzz::ScratchDir() + "/merged.json",
        [&builder](const dtrain::MergedEvent& e) { builder.Add(e); }, {{1, "node-a"}}, {{1, 5}},
        [&](const dtrain::KinetoEvent& e) {
          gpu.Add(e);
          paths.Add(e);
          counters.Add(e);
          regions.Add(e);
          sequences.Add(e);
        },
        [&](int rank, dtrain::MergedTraceFile& out) {
          if (const dtrain::RankCriticalPath* p = paths.EndRank()) {
            dtrain::WriteCriticalPathOverlay(*p, out);
          }
          counters.WriteRank(rank, out);
          if (const dtrain::RankKernelSequences* k = sequences.EndRank(rank)) {
            dtrain::WriteKernelSequenceOverlay(*k, "", out);
          }
        });
    const dtrain::KernelSequences patterns = sequences.Finish();
    dtrain::FormatKernelSequences(patterns);
    dtrain::KernelSequencesJson(patterns).dump();
    const std::vector<dtrain::RankCriticalPath> found = paths.Finish();
    dtrain::FormatCriticalPaths(found);
    dtrain::CriticalPathsJson(found).dump();
    dtrain::FormatGpuAnnotations(regions.Finish());
    dtrain::GpuAnnotationsJson(regions.Finish()).dump();
    dtrain::FormatTimelineSummary(builder.Finish(result.ranks));
    const dtrain::GpuTimeSummary summary = gpu.Finish(result.ranks);
    dtrain::FormatGpuTimeSummary(summary);
    dtrain::GpuTimeSummaryJson(summary).dump();
    for (const auto& [rank, ops] : summary.operators) {
      dtrain::FormatTraceDiff(dtrain::DiffRankOps(ops, ops, "itself"));
    }
  } catch (const dtrain::Error&) {
  }
  return 0;
}
