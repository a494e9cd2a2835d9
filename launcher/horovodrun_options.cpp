// The variables are those of horovodrun 0.28's runner (common/util/config_parser.py
// set_env_from_args, and gloo_run.py for the network interfaces).
#include "launcher/horovodrun_options.h"

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

using V = HorovodrunValue;

// An option and the variable it sets: `set_to` for a flag, else the value as given.
struct Setting {
  const char* option;
  const char* variable;
  const char* set_to;
};

constexpr Setting kSettings[] = {
    {"--cycle-time-ms", "HOROVOD_CYCLE_TIME", nullptr},
    {"--cache-capacity", "HOROVOD_CACHE_CAPACITY", nullptr},
    {"--hierarchical-allreduce", "HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
    {"--no-hierarchical-allreduce", "HOROVOD_HIERARCHICAL_ALLREDUCE", "0"},
    {"--hierarchical-allgather", "HOROVOD_HIERARCHICAL_ALLGATHER", "1"},
    {"--no-hierarchical-allgather", "HOROVOD_HIERARCHICAL_ALLGATHER", "0"},
    {"--torus-allreduce", "HOROVOD_TORUS_ALLREDUCE", "1"},
    {"--no-torus-allreduce", "HOROVOD_TORUS_ALLREDUCE", "0"},
    {"--no-stall-check", "HOROVOD_STALL_CHECK_DISABLE", "1"},
    {"--stall-check", "HOROVOD_STALL_CHECK_DISABLE", "0"},
    {"--stall-check-warning-time-seconds", "HOROVOD_STALL_CHECK_TIME_SECONDS", nullptr},
    {"--stall-check-shutdown-time-seconds", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", nullptr},
    {"--mpi-threads-disable", "HOROVOD_MPI_THREADS_DISABLE", "1"},
    {"--no-mpi-threads-disable", "HOROVOD_MPI_THREADS_DISABLE", "0"},
    {"--num-nccl-streams", "HOROVOD_NUM_NCCL_STREAMS", nullptr},
    {"--tcp", "NCCL_IB_DISABLE", "1"},
    {"--thread-affinity", "HOROVOD_THREAD_AFFINITY", nullptr},
    {"--gloo-timeout-seconds", "HOROVOD_GLOO_TIMEOUT_SECONDS", nullptr},
    {"--log-level", "HOROVOD_LOG_LEVEL", nullptr},
    {"--log-with-timestamp", "HOROVOD_LOG_HIDE_TIME", "0"},
    {"--log-without-timestamp", "HOROVOD_LOG_HIDE_TIME", "1"},
};

// Only with --autotune, as horovodrun reads them.
constexpr Setting kAutotuneSettings[] = {
    {"--autotune-log-file", "HOROVOD_AUTOTUNE_LOG", nullptr},
    {"--autotune-warmup-samples", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", nullptr},
    {"--autotune-steps-per-sample", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", nullptr},
    {"--autotune-bayes-opt-max-samples", "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", nullptr},
    {"--autotune-gaussian-process-noise", "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", nullptr},
};

// Options that say yes and no to one thing: horovodrun refuses the two together.
constexpr std::pair<const char*, const char*> kOpposites[] = {
    {"--hierarchical-allreduce", "--no-hierarchical-allreduce"},
    {"--hierarchical-allgather", "--no-hierarchical-allgather"},
    {"--torus-allreduce", "--no-torus-allreduce"},
    {"--autotune", "--no-autotune"},
    {"--timeline-mark-cycles", "--no-timeline-mark-cycles"},
    {"--no-stall-check", "--stall-check"},
    {"--mpi-threads-disable", "--no-mpi-threads-disable"},
    {"--log-with-timestamp", "--log-without-timestamp"},
};

void Add(const Setting& s, const std::map<std::string, std::string>& given,
         std::vector<std::string>& out) {
  auto it = given.find(s.option);
  if (it != given.end())
    out.push_back(std::string(s.variable) + "=" + (s.set_to ? s.set_to : it->second));
}

}  // namespace

const std::vector<HorovodrunOption>& HorovodrunOptions() {
  static const std::vector<HorovodrunOption> options = {
      {"--network-interfaces", V::kList,
       "network interfaces for Horovod's Gloo (the first) and NCCL (all): HOROVOD_GLOO_IFACE, "
       "NCCL_SOCKET_IFNAME; default: each node's, with --horovod"},
      {"--network-interface", V::kList,
       "one network interface (repeatable): as --network-interfaces"},
      {"--fusion-threshold-mb", V::kWhole, "HOROVOD_FUSION_THRESHOLD, in MiB"},
      {"--cycle-time-ms", V::kNumber, "HOROVOD_CYCLE_TIME"},
      {"--cache-capacity", V::kWhole, "HOROVOD_CACHE_CAPACITY"},
      {"--hierarchical-allreduce", V::kFlag, "HOROVOD_HIERARCHICAL_ALLREDUCE=1"},
      {"--no-hierarchical-allreduce", V::kFlag, "HOROVOD_HIERARCHICAL_ALLREDUCE=0"},
      {"--hierarchical-allgather", V::kFlag, "HOROVOD_HIERARCHICAL_ALLGATHER=1"},
      {"--no-hierarchical-allgather", V::kFlag, "HOROVOD_HIERARCHICAL_ALLGATHER=0"},
      {"--torus-allreduce", V::kFlag, "HOROVOD_TORUS_ALLREDUCE=1"},
      {"--no-torus-allreduce", V::kFlag, "HOROVOD_TORUS_ALLREDUCE=0"},
      {"--autotune", V::kFlag, "HOROVOD_AUTOTUNE=1, and the --autotune-* options apply"},
      {"--no-autotune", V::kFlag, "no autotuning (Horovod's default)"},
      {"--autotune-log-file", V::kText, "HOROVOD_AUTOTUNE_LOG (with --autotune)"},
      {"--autotune-warmup-samples", V::kWhole, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES (with --autotune)"},
      {"--autotune-steps-per-sample", V::kWhole,
       "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE (with --autotune)"},
      {"--autotune-bayes-opt-max-samples", V::kWhole,
       "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES (with --autotune)"},
      {"--autotune-gaussian-process-noise", V::kNumber,
       "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE (with --autotune)"},
      {"--timeline-filename", V::kText,
       "HOROVOD_TIMELINE: Horovod's rank-0 timeline there (not with --timeline, which keeps "
       "every rank's in the job folder)"},
      {"--timeline-mark-cycles", V::kFlag,
       "HOROVOD_TIMELINE_MARK_CYCLES=1 (with --timeline-filename)"},
      {"--no-timeline-mark-cycles", V::kFlag,
       "HOROVOD_TIMELINE_MARK_CYCLES=0 (with --timeline-filename)"},
      {"--no-stall-check", V::kFlag, "HOROVOD_STALL_CHECK_DISABLE=1 (Horovod's own check)"},
      {"--stall-check", V::kFlag, "HOROVOD_STALL_CHECK_DISABLE=0"},
      {"--stall-check-warning-time-seconds", V::kWhole, "HOROVOD_STALL_CHECK_TIME_SECONDS"},
      {"--stall-check-shutdown-time-seconds", V::kWhole, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"},
      {"--mpi-threads-disable", V::kFlag, "HOROVOD_MPI_THREADS_DISABLE=1"},
      {"--no-mpi-threads-disable", V::kFlag, "HOROVOD_MPI_THREADS_DISABLE=0"},
      {"--num-nccl-streams", V::kWhole, "HOROVOD_NUM_NCCL_STREAMS"},
      {"--tcp", V::kFlag, "NCCL_IB_DISABLE=1: TCP, not InfiniBand"},
      {"--thread-affinity", V::kWhole, "HOROVOD_THREAD_AFFINITY"},
      {"--gloo-timeout-seconds", V::kWhole, "HOROVOD_GLOO_TIMEOUT_SECONDS"},
      {"--log-level", V::kLogLevel, "HOROVOD_LOG_LEVEL"},
      {"--log-with-timestamp", V::kFlag, "HOROVOD_LOG_HIDE_TIME=0"},
      {"--log-without-timestamp", V::kFlag, "HOROVOD_LOG_HIDE_TIME=1"},
  };
  return options;
}

std::vector<std::string> HorovodrunVariables(const std::map<std::string, std::string>& given,
                                             std::vector<std::string>& notes) {
  for (const auto& [yes, no] : kOpposites) {
    if (given.count(yes) && given.count(no)) {
      throw UsageError(fmt::format("{} and {} say opposite things; give one of them", yes, no));
    }
  }
  std::vector<std::string> out;
  if (auto mb = given.find("--fusion-threshold-mb"); mb != given.end())
    out.push_back("HOROVOD_FUSION_THRESHOLD=" + std::to_string(std::stoll(mb->second) << 20));
  for (const Setting& s : kSettings) Add(s, given, out);
  const bool autotune = given.count("--autotune") > 0;
  if (autotune) out.push_back("HOROVOD_AUTOTUNE=1");
  for (const Setting& s : kAutotuneSettings) {
    if (autotune)
      Add(s, given, out);
    else if (given.count(s.option))
      notes.push_back(std::string(s.option) +
                      " is not used without --autotune, as under horovodrun");
  }
  const bool timeline = given.count("--timeline-filename") > 0;
  if (timeline) out.push_back("HOROVOD_TIMELINE=" + given.at("--timeline-filename"));
  for (const char* cycles : {"--timeline-mark-cycles", "--no-timeline-mark-cycles"}) {
    if (!given.count(cycles)) continue;
    if (timeline)
      out.push_back(fmt::format("HOROVOD_TIMELINE_MARK_CYCLES={}",
                                std::string(cycles) == "--timeline-mark-cycles" ? 1 : 0));
    else
      notes.push_back(std::string(cycles) +
                      " is not used without --timeline-filename, as under horovodrun");
  }
  std::string nics;
  for (const char* option : {"--network-interfaces", "--network-interface"}) {
    if (auto it = given.find(option); it != given.end())
      nics += (nics.empty() ? "" : ",") + it->second;
  }
  if (!nics.empty()) {
    out.push_back("HOROVOD_GLOO_IFACE=" + nics.substr(0, nics.find(',')));
    out.push_back("NCCL_SOCKET_IFNAME=" + nics);
  }
  return out;
}

}  // namespace dtrain
