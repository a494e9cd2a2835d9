// Resolves the inputs and outputs, then one streaming merge feeds the summary as it goes.
#include "launcher/timeline_report.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/job_record.h"
#include "launcher/log_reader.h"
#include "launcher/step_chart_svg.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

// "rank-12.json" -> 12, anything else sorts last.
long RankNumber(const fs::path& file) {
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

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw Error(fmt::format("{}: cannot write", path));
}

}  // namespace

std::vector<std::string> JobTraceFiles(const std::string& job_dir) {
  fs::path dir = fs::path(job_dir) / "timeline";
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && RankNumber(entry.path()) >= 0 &&
        entry.path().extension() == ".json") {
      files.push_back(entry.path());
    }
  }
  if (files.empty()) {
    throw Error(
        fmt::format("{}: no per-rank traces (rank-R.json); launch the job with --timeline "
                    "(or job.timeline: true in the cluster file)",
                    dir.string()));
  }
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return RankNumber(a) < RankNumber(b); });
  std::vector<std::string> paths;
  for (const fs::path& f : files) paths.push_back(f.string());
  return paths;
}

TimelineReport MakeTimeline(const TimelineRequest& request) {
  TimelineReport report;
  std::vector<std::string> inputs = request.inputs;
  std::map<int, std::string> hosts;
  report.output = request.output;
  if (inputs.empty()) {
    std::string log_dir = request.log_dir.empty() ? DefaultLogDir() : request.log_dir;
    std::string job_dir = ResolveJobDir(log_dir, request.job);
    JobSummary job = JobRecordOrNothing(job_dir);
    if (request.fetch) report.fetch = FetchRemoteTraces(job_dir, job, request.cluster_file);
    inputs = TracesAfterFetch(job_dir, report.fetch);
    hosts = job.rank_hosts;
    if (report.output.empty()) report.output = job_dir + "/timeline.json";
  } else if (!request.job.empty()) {
    throw UsageError("give either trace files or --job, not both");
  } else if (!request.cluster_file.empty()) {
    throw UsageError("-c names the cluster to fetch a job's traces from; not for trace files");
  }
  if (report.output.empty()) report.output = "timeline.json";
  TimelineSummaryBuilder builder;
  MergedEventObserver observer;
  if (request.summary) observer = [&builder](const MergedEvent& e) { builder.Add(e); };
  report.merge = MergeTimelines(inputs, report.output, observer, hosts);
  if (request.summary) {
    report.summary = builder.Finish(report.merge.ranks);
    fs::path dir = fs::path(report.output).parent_path();
    report.chart =
        (dir.empty() ? fs::path("timeline-steps.svg") : dir / "timeline-steps.svg").string();
    WriteText(report.chart, StepChartSvg(report.summary));
  }
  return report;
}

}  // namespace dtrain
