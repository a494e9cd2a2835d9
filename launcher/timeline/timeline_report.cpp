// Resolves the inputs and outputs, then one streaming merge feeds the summary as it goes.
#include "launcher/timeline/timeline_report.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/file_replace.h"
#include "launcher/job_record.h"
#include "launcher/log_reader.h"
#include "launcher/timeline/counter_tracks.h"
#include "launcher/timeline/critical_path_overlay.h"
#include "launcher/timeline/step_chart_svg.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

// "rank-12.json" -> 12, anything else sorts last.
long RankNumber(const fs::path& file) {
  if (file.extension() != ".json") return -1;
  std::string stem = file.stem().string();
  if (stem.rfind("rank-", 0) != 0) return -1;
  try {
    return std::stol(stem.substr(5));
  } catch (const std::exception&) {
    return -1;
  }
}

// The job's record; empty when there is none (traces copied by hand still merge).
JobSummary JobRecordOrNothing(const std::string& job_dir) {
  try {
    return ReadJobSummary(job_dir);
  } catch (const Error&) {
    return {};
  }
}

// The job's traces on this machine; when there are none, the error also says why fetching
// them from the nodes did not help.
std::vector<std::string> TracesAfterFetch(const std::string& job_dir,
                                          const TraceFetchReport& fetch) {
  try {
    return JobTraceFiles(job_dir);
  } catch (const Error& e) {
    if (fetch.warnings.empty()) throw;
    std::string why;
    for (const std::string& warning : fetch.warnings) why += "\n  " + warning;
    throw Error(fmt::format("{}; fetching them from the nodes failed:{}", e.what(), why));
  }
}

// Entries of <job>/timeline that look like traces but are not files (a link to a device, a
// dangling link, a folder): said, never dropped silently.
std::vector<std::string> SkippedTraceEntries(const std::string& job_dir) {
  std::vector<std::string> notes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::path(job_dir) / "timeline", ec)) {
    const std::string name = entry.path().filename().string();
    const bool trace_name = name.find(".json") != std::string::npos && name[0] != '.';
    std::error_code type_ec;
    if (trace_name && !entry.is_regular_file(type_ec)) {
      notes.push_back(
          fmt::format("{}: not a regular file (a link to a device, or dangling?); "
                      "skipped",
                      entry.path().string()));
    }
  }
  return notes;
}

// Ranks of a job that recorded timelines whose trace did not make it into the merge.
std::vector<std::string> MissingRankTraces(const JobSummary& job, const MergeResult& merge) {
  std::vector<std::string> notes;
  if (job.rank_traces.empty()) return notes;  // the job did not record span timelines
  std::set<int> merged;
  for (const RankTraceInfo& info : merge.ranks) merged.insert(info.rank);
  for (const auto& [rank, trace] : job.rank_traces) {
    if (!merged.count(rank)) {
      notes.push_back(
          fmt::format("rank {}: no trace ({} is missing or unreadable); merged "
                      "{} of {} ranks",
                      rank, trace, merged.size(), job.rank_traces.size()));
    }
  }
  return notes;
}

// --against: the other run's traces read as this run's are (merged into a scratch folder that is
// removed after), and one rank of each compared: the only rank of each side, else the first rank
// both have.
TraceDiff CompareWithOtherRun(const TimelineRequest& request, const TimelineReport& here) {
  TimelineRequest other;
  other.log_dir = request.log_dir;
  other.step_name = request.step_name;
  other.fetch = request.fetch;
  other.summary = true;
  other.operators = true;
  std::string label;
  bool files = true;
  for (const std::string& item : request.against) files = files && fs::is_regular_file(item);
  if (files) {
    other.inputs = request.against;
    label = request.against.size() == 1 ? request.against.front()
                                        : fmt::format("{} trace files", request.against.size());
  } else if (request.against.size() == 1) {
    other.job = request.against.front();
    label = "job " + other.job;
  } else {
    throw UsageError(
        "--against: give one job name, or trace files (each of them an existing file)");
  }
  std::error_code ec;
  const fs::path scratch =
      fs::temp_directory_path(ec) / fmt::format("dtrain-against-{}", static_cast<long>(::getpid()));
  fs::create_directories(scratch, ec);
  struct RemoveAfter {
    fs::path path;
    ~RemoveAfter() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } remove_after{scratch};
  other.output = (scratch / "timeline.json").string();
  const TimelineReport there = MakeTimeline(other);
  const std::map<int, RankOps>& now = here.gpu.operators;
  const std::map<int, RankOps>& was = there.gpu.operators;
  if (now.empty() || was.empty()) {
    throw Error(fmt::format(
        "--against {}: {} no PyTorch profiler trace; --against compares the operators and "
        "kernels of PyTorch traces",
        label, now.empty() ? "this run has" : "it has"));
  }
  if (now.size() == 1 && was.size() == 1) {
    return DiffRankOps(was.begin()->second, now.begin()->second, label);
  }
  for (const auto& [rank, ops] : now) {
    if (auto same = was.find(rank); same != was.end()) return DiffRankOps(same->second, ops, label);
  }
  throw Error(fmt::format("--against {}: no rank has a PyTorch trace on both sides", label));
}

// Folds `more` (another kind of file from the same nodes) into `into`.
void AddFetchReport(TraceFetchReport& into, TraceFetchReport more) {
  into.contacted = into.contacted || more.contacted;
  into.fetched.insert(into.fetched.end(), more.fetched.begin(), more.fetched.end());
  into.bytes += more.bytes;
  into.up_to_date += more.up_to_date;
  for (std::string& w : more.warnings) into.warnings.push_back(std::move(w));
}

}  // namespace

std::vector<std::string> JobTraceFiles(const std::string& job_dir) {
  fs::path dir = fs::path(job_dir) / "timeline";
  std::vector<fs::path> files;
  std::error_code ec;
  auto is_trace = [](const fs::path& path) {
    const std::string name = path.filename().string();
    auto ends = [&name](const std::string& tail) {
      return name.size() > tail.size() &&
             name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
    };
    return name[0] != '.' && (ends(".json") || ends(".json.gz"));
  };
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && is_trace(entry.path())) files.push_back(entry.path());
  }
  if (files.empty()) {
    throw Error(
        fmt::format("{}: no per-rank traces; launch dtrain-clip with --timeline (or "
                    "job.timeline: true in the cluster file), or have a PyTorch script export "
                    "its profiler trace to $DTRAIN_TRACE_DIR (README, `dtrain timeline`)",
                    dir.string()));
  }
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    const unsigned long ra = static_cast<unsigned long>(RankNumber(a));  // -1: after all ranks
    const unsigned long rb = static_cast<unsigned long>(RankNumber(b));
    return ra != rb ? ra < rb : a.filename() < b.filename();
  });
  std::vector<std::string> paths;
  for (const fs::path& f : files) paths.push_back(f.string());
  return paths;
}

TimelineReport MakeTimeline(const TimelineRequest& request) {
  TimelineReport report;
  std::vector<std::string> inputs = request.inputs;
  std::map<int, std::string> hosts;
  std::map<int, int64_t> clock_offsets;
  std::vector<std::string> input_notes;
  JobSummary job;
  report.output = request.output;
  if (inputs.empty()) {
    std::string log_dir = request.log_dir.empty() ? DefaultLogDir() : request.log_dir;
    std::string job_dir = ResolveJobDir(log_dir, request.job);
    job = JobRecordOrNothing(job_dir);
    if (request.fetch) {
      report.fetch = FetchRemoteTraces(job_dir, job, request.cluster_file);
      TraceFetchReport profiler = FetchRemoteProfilerTraces(job_dir, job, request.cluster_file);
      AddFetchReport(report.fetch, std::move(profiler));
      // Metrics a node kept (private storage) come along, if the launch could not get them.
      for (std::string& w : FetchRemoteMetrics(job_dir, job, request.cluster_file).warnings) {
        report.fetch.warnings.push_back(std::move(w));
      }
    }
    input_notes = SkippedTraceEntries(job_dir);
    inputs = TracesAfterFetch(job_dir, report.fetch);
    hosts = job.rank_hosts;
    clock_offsets = job.rank_clock_offsets_us;
    if (report.output.empty()) report.output = job_dir + "/timeline.json";
  } else if (!request.job.empty()) {
    throw UsageError("give either trace files or --job, not both");
  } else if (!request.cluster_file.empty()) {
    throw UsageError("-c names the cluster to fetch a job's traces from; not for trace files");
  }
  if (report.output.empty()) report.output = "timeline.json";
  TimelineSummaryBuilder builder;
  GpuTimeSummaryBuilder gpu_builder(request.step_name,
                                    request.operators || !request.against.empty(),
                                    request.straggler_candidates);
  std::optional<CriticalPathBuilder> paths;
  if (request.summary && !request.critical_path.empty()) {
    paths.emplace(request.step_name, request.critical_path);
  }
  GpuAnnotationBreakdownBuilder annotations;
  std::optional<KernelSequenceBuilder> sequences;
  if (request.summary && !request.kernel_sequences.empty()) {
    sequences.emplace(request.kernel_sequences, request.min_pattern_len);
  }
  std::optional<CounterTracksBuilder> counters;
  if (request.counters) counters.emplace();
  MergedEventObserver observer;
  KinetoEventObserver kineto_observer;
  if (request.summary) observer = [&builder](const MergedEvent& e) { builder.Add(e); };
  if (request.summary || counters) {
    kineto_observer = [&](const KinetoEvent& e) {
      if (request.summary) {
        gpu_builder.Add(e);
        annotations.Add(e);
      }
      if (paths) paths->Add(e);
      if (sequences) sequences->Add(e);
      if (counters) counters->Add(e);
    };
  }
  // The paths, the kernel sequences and the counters are drawn into the merged trace, each rank's
  // once the merge has read its trace; the GPU summary sums that rank up then and lets its events
  // go.
  std::function<void(int, MergedTraceFile&)> rank_done;
  if (request.summary || paths || counters || sequences) {
    rank_done = [&](int rank, MergedTraceFile& out) {
      if (request.summary) gpu_builder.EndRank(rank);
      if (sequences) {
        if (const RankKernelSequences* found = sequences->EndRank(rank)) {
          WriteKernelSequenceOverlay(*found, request.kernel_sequences, out);
        }
      }
      if (paths) {
        if (const RankCriticalPath* path = paths->EndRank()) WriteCriticalPathOverlay(*path, out);
      }
      if (counters) counters->WriteRank(rank, out);
    };
  }
  report.merge = MergeTimelines(inputs, report.output, observer, hosts, clock_offsets,
                                kineto_observer, rank_done);
  for (std::string& note : MissingRankTraces(job, report.merge)) input_notes.push_back(note);
  report.merge.warnings.insert(report.merge.warnings.begin(), input_notes.begin(),
                               input_notes.end());
  // Both read PyTorch profiler traces only: asked for on none, they say so instead of nothing.
  const bool kineto = std::any_of(report.merge.ranks.begin(), report.merge.ranks.end(),
                                  [](const RankTraceInfo& info) { return info.kineto; });
  for (const auto& [asked, option] : {std::pair{paths.has_value(), "--critical-path"},
                                      std::pair{sequences.has_value(), "--kernel-sequences"},
                                      std::pair{counters.has_value(), "--counters"}}) {
    if (asked && !kineto) {
      report.merge.warnings.push_back(
          fmt::format("{}: none of the traces is a PyTorch profiler trace, which it reads "
                      "(record one with torch.profiler; see dtrain-timeline(1))",
                      option));
    }
  }
  if (request.summary) {
    report.gpu = gpu_builder.Finish(report.merge.ranks);
    if (paths) report.critical_paths = paths->Finish();
    if (sequences) report.kernel_sequences = sequences->Finish();
    report.gpu_annotations = annotations.Finish();
    report.summary = builder.Finish(report.merge.ranks);
    if (!request.against.empty()) report.diff = CompareWithOtherRun(request, report);
    bool span_traces = false;
    for (const RankTraceInfo& info : report.merge.ranks) span_traces |= !info.kineto;
    if (!span_traces) return report;  // the step chart draws dtrain-clip's spans
    fs::path dir = fs::path(report.output).parent_path();
    report.chart =
        (dir.empty() ? fs::path("timeline-steps.svg") : dir / "timeline-steps.svg").string();
    ReplaceFile(report.chart, StepChartSvg(report.summary), "the step chart");
  }
  return report;
}

namespace {

// True when some rank's trace is dtrain-clip's or Horovod's (the span summary applies).
bool HasSpanTraces(const TimelineReport& report) {
  for (const RankTraceInfo& info : report.merge.ranks) {
    if (!info.kineto) return true;
  }
  return false;
}

}  // namespace

std::string FormatTimelineReport(const TimelineReport& report) {
  std::string out;
  if (HasSpanTraces(report)) out += FormatTimelineSummary(report.summary);
  if (!report.gpu.ranks.empty()) {
    if (!out.empty()) out += '\n';
    out += FormatGpuTimeSummary(report.gpu);
  }
  if (std::string regions = FormatGpuAnnotations(report.gpu_annotations); !regions.empty()) {
    out += "\n" + regions;
  }
  if (!report.critical_paths.empty()) out += "\n" + FormatCriticalPaths(report.critical_paths);
  if (report.kernel_sequences) out += "\n" + FormatKernelSequences(*report.kernel_sequences);
  if (report.diff) out += "\n" + FormatTraceDiff(*report.diff);
  return out;
}

nlohmann::json TimelineReportJson(const TimelineReport& report) {
  using nlohmann::json;
  json doc = GpuTimeSummaryJson(report.gpu);
  json& ranks = doc["ranks"];
  for (const RankTime& r : report.summary.ranks) {
    bool span_trace = false;
    for (const RankTraceInfo& info : report.merge.ranks) {
      span_trace = span_trace || (info.rank == r.rank && !info.kineto);
    }
    if (!span_trace) continue;
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"trace", "dtrain"},
                     {"wall_ms", r.wall_us / 1000.0},
                     {"compute_ms", r.compute_us / 1000.0},
                     {"communication_ms", r.comm_us / 1000.0},
                     {"communication_exposed_ms", r.comm_exposed_us / 1000.0},
                     {"wait_ms", r.wait_us / 1000.0},
                     {"idle_ms", r.idle_us / 1000.0}});
  }
  if (report.diff) doc["against"] = TraceDiffJson(*report.diff);
  if (!report.gpu_annotations.empty())
    doc["gpu_annotations"] = GpuAnnotationsJson(report.gpu_annotations);
  if (!report.critical_paths.empty())
    doc["critical_path"] = CriticalPathsJson(report.critical_paths);
  if (report.kernel_sequences)
    doc["kernel_sequences"] = KernelSequencesJson(*report.kernel_sequences);
  doc["output"] = report.output;
  doc["chart"] = report.chart;
  doc["events"] = report.merge.events;
  doc["warnings"] = report.merge.warnings;
  return doc;
}

}  // namespace dtrain
