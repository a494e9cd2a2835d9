// `dtrain doctor -c FILE [--json] [--timeout S] [--bandwidth] [--compute] [--exclude-bad -o FILE]
// [--drain]`: flags in, RunDoctor, report out (and the healthy nodes' hostfile, the unfit Slurm
// nodes drained).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cli/commands.h"
#include "doctor/bandwidth_run.h"
#include "doctor/compute_run.h"
#include "doctor/cut_short.h"
#include "doctor/doctor_run.h"
#include "doctor/healthy_hostfile.h"
#include "doctor/report.h"
#include "doctor/slurm_drain.h"
#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "launcher/job_supervisor.h"

namespace dtrain {
namespace {

struct DoctorFlags {
  std::string cluster_file;
  bool json = false;
  double timeout_s = 30;
  bool bandwidth = false;
  int bandwidth_mib = 8;
  bool compute = false;
  double compute_timeout_s = 300;
  bool exclude_bad = false;
  std::string hostfile;  // -o
  bool drain = false;
};

int RunDoctorCommand(const DoctorFlags& flags) {
  if (flags.timeout_s <= 0) throw UsageError("--timeout: expected a number of seconds > 0");
  if (flags.bandwidth_mib < 1) throw UsageError("--bandwidth-mib: expected a size in MiB >= 1");
  if (flags.compute_timeout_s <= 0) {
    throw UsageError("--compute-timeout: expected a number of seconds > 0");
  }
  const ClusterSpec cluster = LoadClusterOrDefault(flags.cluster_file);
  if (flags.drain && cluster.transport != TransportKind::kSlurm) {
    throw UsageError(
        "--drain drains Slurm nodes, and this cluster's nodes are not Slurm's: for other nodes, "
        "--exclude-bad -o FILE writes a hostfile without the bad ones");
  }
  // Ctrl-C (SIGTERM, SIGHUP) from here on cuts the run short: what runs on the nodes is killed,
  // what had ended is reported, and nothing is judged from what had not (cut_short.h).
  InterruptHandlers interrupts;
  const auto interrupted = [] { return JobSupervisor::InterruptSignal() != 0; };
  const auto started = std::chrono::steady_clock::now();
  DoctorResult result = RunDoctor(cluster, flags.timeout_s, interrupted);
  std::string cut_short = result.cut_short ? "the probes" : "";
  // A test's findings once it ended (true), or, cut short, one warning in their place.
  const auto take = [&](const std::string& test, const std::string& job_dir,
                        const std::vector<Finding>& found) {
    if (interrupted()) {
      cut_short = "--" + test;
      result.findings.push_back(CutShortTestFinding(test, job_dir));
      return false;
    }
    result.findings.insert(result.findings.end(), found.begin(), found.end());
    return true;
  };
  const ClusterSpec& spec = result.spec;
  BandwidthResult bandwidth;
  bool bandwidth_judged = false;
  if (flags.bandwidth && !interrupted()) {
    BandwidthOptions options;
    options.cluster.cluster_file = flags.cluster_file;
    options.size_mib = flags.bandwidth_mib;
    options.cancelled = interrupted;
    bandwidth = RunBandwidthTest(spec, options);
    bandwidth_judged = take("bandwidth", bandwidth.job_dir, bandwidth.verdict.findings);
  }
  ComputeResult compute;
  bool compute_judged = false;
  if (flags.compute && !interrupted()) {
    ComputeOptions options;
    options.cluster.cluster_file = flags.cluster_file;
    options.timeout_s = flags.compute_timeout_s;
    options.gpu_models = GpuModels(result.run);
    compute = RunComputeCheck(spec, options);
    compute_judged = take("compute", compute.job_dir, compute.findings);
  }
  const int signal = JobSupervisor::InterruptSignal();
  if (signal != 0 && cut_short.empty()) cut_short = "the checks";  // between two steps
  if (flags.json) {
    std::string report = RenderJsonReport(spec, result.run, result.findings);
    report = AddPeerConnectionsJson(report, result.run.peers, result.run.nodes);
    if (bandwidth_judged) report = AddBandwidthJson(report, bandwidth);
    if (compute_judged) report = AddComputeJson(report, compute);
    if (signal != 0) report = AddCutShortJson(report, signal, cut_short);
    std::fputs(report.c_str(), stdout);
  } else {
    // https://no-color.org: NO_COLOR set to a non-empty value turns colour off.
    const char* no_color = std::getenv("NO_COLOR");
    bool colour = isatty(STDOUT_FILENO) && (no_color == nullptr || *no_color == '\0');
    std::fputs(RenderTextReport(spec, result.run, result.findings, colour).c_str(), stdout);
  }
  std::fflush(stdout);
  if (signal != 0) {
    // A node cut short is neither good nor bad: no hostfile, no drain from a partial run.
    std::fprintf(
        stderr, "dtrain doctor: %s\n",
        DescribeCutShort(
            signal, cut_short,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
            flags.exclude_bad ? flags.hostfile : "", flags.drain)
            .c_str());
    return 128 + signal;
  }
  if (flags.exclude_bad) {
    const std::string wrote =
        WriteHealthyHostfile(flags.hostfile, MakeHealthyHostfile(result.run, result.findings));
    std::fprintf(stderr, "dtrain doctor: %s\n", wrote.c_str());
  }
  if (flags.drain) {
    const std::vector<SlurmDrain> drain =
        PlanSlurmDrain(spec, UnfitToDrain(spec, result.run, compute.findings));
    if (drain.empty()) {
      std::fprintf(stderr,
                   "dtrain doctor: no Slurm node to drain: none failed the checks the "
                   "launch quarantines a node for\n");
    }
    for (const std::string& line : DrainSlurmNodes(drain))
      std::fprintf(stderr, "dtrain doctor: %s\n", line.c_str());
  }
  return DoctorExitStatus(result.findings);
}

}  // namespace

void AddDoctorCommand(CLI::App& app, CommandRun& run) {
  auto flags = std::make_shared<DoctorFlags>();
  CLI::App* cmd = app.add_subcommand(
      "doctor",
      "Check every node and compare them: driver, CUDA, NCCL, Python, torch, Horovod, "
      "PYTHONPATH, rendezvous port, connections between nodes, clocks");
  cmd->add_option("-c,--cluster", flags->cluster_file,
                  "Cluster file (default ./cluster.yaml, else this machine alone)");
  cmd->add_flag("--json", flags->json, "Print facts and findings as JSON (see dtrain-doctor(1))");
  cmd->add_option("--timeout", flags->timeout_s,
                  "Seconds to wait for all nodes (raised to the longest timeout of the cluster "
                  "file's health_checks + 5); a node slower than this is reported")
      ->capture_default_str();
  cmd->add_flag("--bandwidth", flags->bandwidth,
                "Also measure allreduce bandwidth (all nodes, node pairs, inside nodes) with the "
                "job's backend and name the slow node or link, and links whose error counters "
                "grow under the test's load");
  cmd->add_option("--bandwidth-mib", flags->bandwidth_mib, "MiB per allreduce of --bandwidth")
      ->capture_default_str();
  cmd->add_flag("--compute", flags->compute,
                "Also run the training step's computations on every GPU (dtrain-clip check) "
                "against references and name the node whose GPU computes wrong results or hangs");
  cmd->add_option("--compute-timeout", flags->compute_timeout_s,
                  "Seconds one GPU's --compute check may take before it counts as hung")
      ->capture_default_str();
  CLI::Option* exclude = cmd->add_flag(
      "--exclude-bad", flags->exclude_bad,
      "Write the nodes without an error to -o FILE, a hostfile for launch --hostfile");
  CLI::Option* output =
      cmd->add_option("-o,--output", flags->hostfile, "The hostfile --exclude-bad writes");
  exclude->needs(output);
  output->needs(exclude);
  cmd->add_flag("--drain", flags->drain,
                "On Slurm: drain the nodes that fail the checks a launch quarantines a node for "
                "(scontrol update State=DRAIN, the reason \"dtrain doctor: ...\"); needs Slurm's "
                "operator role");
  cmd->footer(
      "Ctrl-C stops it at once and reports what had ended; what had not is not judged, and no "
      "hostfile is written and no node drained.\n"
      "Exit status: 0 no errors (warnings allowed), 1 a check failed, 2 usage or "
      "cluster-file error, 130 interrupted.");
  cmd->callback([flags, &run] { run = [flags] { return RunDoctorCommand(*flags); }; });
}

}  // namespace dtrain
