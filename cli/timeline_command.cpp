// `dtrain timeline`: flags to a TimelineRequest; prints where the merged trace went, warnings,
// and with --summary the report.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "launcher/error.h"
#include "launcher/timeline/timeline_report.h"

namespace dtrain {
namespace {

int RunTimeline(const TimelineRequest& request) {
  TimelineReport report = MakeTimeline(request);
  for (const std::string& warning : report.fetch.warnings) {
    std::fprintf(stderr, "dtrain timeline: warning: %s\n", warning.c_str());
  }
  if (!report.fetch.fetched.empty()) {
    std::printf("fetched %zu trace%s (%.1f MB) from the nodes\n", report.fetch.fetched.size(),
                report.fetch.fetched.size() == 1 ? "" : "s", report.fetch.bytes / 1e6);
  }
  for (const std::string& warning : report.merge.warnings) {
    std::fprintf(stderr, "dtrain timeline: warning: %s\n", warning.c_str());
  }
  std::printf("merged %zu rank%s (%llu events) into %s\n", report.merge.ranks.size(),
              report.merge.ranks.size() == 1 ? "" : "s",
              static_cast<unsigned long long>(report.merge.events), report.output.c_str());
  if (request.summary) {
    std::printf("\n%s", FormatTimelineReport(report).c_str());
    if (!report.chart.empty()) std::printf("\nstep chart: %s\n", report.chart.c_str());
  }
  return kExitOk;
}

// --summary --json: one JSON document on stdout, warnings on stderr.
int RunTimelineJson(const TimelineRequest& request) {
  TimelineReport report = MakeTimeline(request);
  for (const std::string& warning : report.fetch.warnings) {
    std::fprintf(stderr, "dtrain timeline: warning: %s\n", warning.c_str());
  }
  for (const std::string& warning : report.merge.warnings) {
    std::fprintf(stderr, "dtrain timeline: warning: %s\n", warning.c_str());
  }
  std::printf("%s\n", TimelineReportJson(report)
                          .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                          .c_str());
  return kExitOk;
}

}  // namespace

void AddTimelineCommand(CLI::App& app, CommandRun& run) {
  auto request = std::make_shared<TimelineRequest>();
  CLI::App* cmd = app.add_subcommand(
      "timeline",
      "Merge a job's per-rank traces into one trace on rank 0's clock (opens in Perfetto and "
      "chrome://tracing); --summary: where the time went, per rank");
  cmd->add_option("--log-dir", request->log_dir,
                  "Folder of job logs (default: log_dir of ./cluster.yaml, else ./dtrain-logs)");
  cmd->add_option("--job", request->job, "Job name (default: the newest job)");
  cmd->add_option("-o,--output", request->output,
                  "Merged trace (default: <log_dir>/<job>/timeline.json; ./timeline.json for "
                  "files given by hand)");
  cmd->add_option("-c,--cluster", request->cluster_file,
                  "Cluster file whose ssh settings reach the nodes when traces are fetched "
                  "(default: the one the job was launched with)");
  cmd->add_flag("!--no-fetch", request->fetch,
                "Merge only the traces on this machine; by default, traces an ssh job's ranks "
                "left on their nodes (missing here, or larger there) are copied here first");
  cmd->add_flag(
      "--summary", request->summary,
      "Print compute, communication and waiting per rank, the slowest ranks, the "
      "overlap of communication with compute and the largest fused allreduces (PyTorch "
      "traces: also why each GPU stream sat idle, the kernel launch delays, how far ahead the "
      "CPU launched on each stream, kernel time by type and by kernel, the kernels each ATen "
      "operator launches, each rank's GPU speed at the same work, the ranks whose GPU starts the "
      "collectives last and the GPU time by record_function region); write "
      "timeline-steps.svg beside the merged trace");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag(
      "--json", *json,
      "With --summary: print the summary as one JSON document (per rank GPU time, "
      "overlap, steps, idle by stream, launches, launch queue, speed, top kernels, kernel "
      "breakdown, ATen operators' kernels, regions, stragglers, late NCCL kernels)");
  cmd->add_option("--against", request->against,
                  "With --summary: compare this run with another, operator by operator and "
                  "kernel by kernel, per step (PyTorch traces): a job name, or trace files "
                  "(repeat --against for each)")
      ->expected(1)
      ->type_name("JOB|FILE");
  cmd->add_option("--critical-path", request->critical_path,
                  "With --summary: each rank's critical path through one step, as HTA's critical "
                  "path analysis finds it (PyTorch traces): the share of it bound by the CPU, GPU "
                  "compute, communication, gaps between kernels and launches, and its longest "
                  "stretches. STEP: slowest (each rank's longest step), an index among the "
                  "profiled steps (0: the first), or a step's name")
      ->type_name("STEP")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("needs a step") : std::string(); },
          "STEP"));
  cmd->add_option("--kernel-sequences", request->kernel_sequences,
                  "With --summary: the CPU events named like OPERATOR (a part of the name) that "
                  "launch the same GPU kernels in the same order, most frequent first, as HTA's "
                  "get_frequent_cuda_kernel_sequences finds them (PyTorch traces)")
      ->type_name("OPERATOR")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("needs a name") : std::string(); },
          "OPERATOR"));
  auto* min_len =
      cmd->add_option(
             "--min-pattern-len", request->min_pattern_len,
             "With --kernel-sequences: the fewest GPU activities a pattern has (default 3)")
          ->check(CLI::Range(1, 1000000));
  auto* candidates =
      cmd->add_option("--straggler-candidates", request->straggler_candidates,
                      "With --summary: how many ranks the late GPUs name, as HTA's "
                      "get_potential_stragglers num_candidates (PyTorch traces; default 2)")
          ->type_name("N")
          ->check(CLI::Range(1, 65536));
  cmd->add_flag("--counters", request->counters,
                "Add counter tracks to the merged trace, as HTA's trace with counters (PyTorch "
                "traces): each stream's launch queue and the bandwidth of copies in flight");
  cmd->add_option("--step", request->step_name,
                  "PyTorch traces: the record_function that marks one step (default: "
                  "ProfilerStep#N)");
  cmd->add_option("-i,--input,files", request->inputs,
                  "Trace files to merge instead of a job's (per-rank traces, Horovod timelines, "
                  "PyTorch profiler traces .json or .json.gz)")
      ->check(CLI::ExistingFile);
  cmd->callback([&run, request, json, min_len, candidates] {
    if (*json && !request->summary) throw CLI::ValidationError("--json", "needs --summary");
    if (!request->against.empty() && !request->summary) {
      throw CLI::ValidationError("--against", "needs --summary");
    }
    if (!request->critical_path.empty() && !request->summary) {
      throw CLI::ValidationError("--critical-path", "needs --summary");
    }
    if (!request->kernel_sequences.empty() && !request->summary) {
      throw CLI::ValidationError("--kernel-sequences", "needs --summary");
    }
    if (min_len->count() > 0 && request->kernel_sequences.empty()) {
      throw CLI::ValidationError("--min-pattern-len", "needs --kernel-sequences");
    }
    if (candidates->count() > 0 && !request->summary) {
      throw CLI::ValidationError("--straggler-candidates", "needs --summary");
    }
    run = [request, json] { return *json ? RunTimelineJson(*request) : RunTimeline(*request); };
  });
}

}  // namespace dtrain
