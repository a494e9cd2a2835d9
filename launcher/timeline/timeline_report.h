// `dtrain timeline` end to end: find a job's per-rank traces (or take the files given), merge
// them into one trace, and with a summary, write the step chart beside the merged file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/timeline/critical_path.h"
#include "launcher/timeline/gpu_annotation_breakdown.h"
#include "launcher/timeline/gpu_time_summary.h"
#include "launcher/timeline/kernel_sequences.h"
#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/timeline_summary.h"
#include "launcher/timeline/trace_fetch.h"

namespace dtrain {

struct TimelineRequest {
  std::string log_dir;              // empty: DefaultLogDir()
  std::string job;                  // empty: the newest job
  std::vector<std::string> inputs;  // trace files given by hand; empty: the job's traces
  std::string output;  // empty: <job>/timeline.json, or ./timeline.json for files given by hand
  bool summary = false;
  std::string step_name;     // PyTorch traces: the record_function of one step; "": ProfilerStep#N
  bool fetch = true;         // copy traces left on an ssh job's nodes here first
  std::string cluster_file;  // ssh settings for fetching; empty: the job's own cluster file
  // With `summary`: another run to compare this one with, rank by rank (PyTorch traces): one job
  // name (in `log_dir`), or trace files.
  std::vector<std::string> against;
  bool operators = false;  // keep what each rank ran by name (the run compared with)
  // With `summary`: each rank's critical path through one step (PyTorch traces): "slowest", a
  // step's index among the profiled steps, or its name; empty: none.
  std::string critical_path;
  // Counter tracks in the merged trace (PyTorch traces): launch queues, copy bandwidth.
  bool counters = false;
  // With `summary`: the frequent kernel sequences of the CPU events whose names contain this
  // (PyTorch traces); empty: none.
  std::string kernel_sequences;
  int min_pattern_len = 3;
  // With `summary`: how many ranks the late GPUs name (HTA's num_candidates).
  int straggler_candidates = LateNcclKernelBuilder::kCandidates;
};

struct TimelineReport {
  std::string output;
  std::string chart;  // timeline-steps.svg beside the output; empty without a summary
  TraceFetchReport fetch;
  MergeResult merge;
  TimelineSummary summary;
  GpuTimeSummary gpu;                            // the ranks with PyTorch profiler traces
  std::optional<TraceDiff> diff;                 // with `against`
  std::vector<RankCriticalPath> critical_paths;  // with `critical_path`
  std::vector<RankAnnotations> gpu_annotations;  // with `summary`: the ranks with GPU annotations
  std::optional<KernelSequences> kernel_sequences;  // with `kernel_sequences`
};

// The per-rank traces of a job folder: dtrain-clip's rank-R.json by rank, then every other
// .json or .json.gz there (PyTorch profiler traces written to DTRAIN_TRACE_DIR) by name.
// Throws Error when there are none.
std::vector<std::string> JobTraceFiles(const std::string& job_dir);

// Throws dtrain::Error (no job, no traces, unreadable or invalid files).
TimelineReport MakeTimeline(const TimelineRequest& request);

// The summary as `--summary` prints it, and as `--summary --json` does.
std::string FormatTimelineReport(const TimelineReport& report);
nlohmann::json TimelineReportJson(const TimelineReport& report);

}  // namespace dtrain
