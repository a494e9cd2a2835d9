// The variables are those of horovodrun 0.28's runner (common/util/config_parser.py
// set_env_from_args, and gloo_run.py for the network interfaces).
#include "launcher/horovodrun_options.h"

#include <cstdlib>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

using V = HorovodrunValue;

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

}  // namespace

const std::vector<HorovodrunOption>& HorovodrunOptions() {
  static const std::vector<HorovodrunOption> options = {
      {"--network-interfaces", V::kList, nullptr, nullptr, nullptr,
       "network interfaces: HOROVOD_GLOO_IFACE (the first) and NCCL_SOCKET_IFNAME (all), in "
       "place of what --horovod looks up"},
      {"--network-interface", V::kList, nullptr, nullptr, nullptr,
       "one network interface (repeatable), as --network-interfaces"},
      {"--config-file", V::kText, nullptr, nullptr, nullptr,
       "a YAML of these values (params, autotune, timeline, stall_check, library_options, "
       "logging), under the command line's"},
      {"--fusion-threshold-mb", V::kWhole, "HOROVOD_FUSION_THRESHOLD", nullptr, nullptr,
       "given in MiB, set in bytes"},
      {"--cycle-time-ms", V::kNumber, "HOROVOD_CYCLE_TIME", nullptr, nullptr, nullptr},
      {"--cache-capacity", V::kWhole, "HOROVOD_CACHE_CAPACITY", nullptr, nullptr, nullptr},
      {"--hierarchical-allreduce", V::kFlag, "HOROVOD_HIERARCHICAL_ALLREDUCE", "1", nullptr,
       nullptr},
      {"--no-hierarchical-allreduce", V::kFlag, "HOROVOD_HIERARCHICAL_ALLREDUCE", "0", nullptr,
       nullptr},
      {"--hierarchical-allgather", V::kFlag, "HOROVOD_HIERARCHICAL_ALLGATHER", "1", nullptr,
       nullptr},
      {"--no-hierarchical-allgather", V::kFlag, "HOROVOD_HIERARCHICAL_ALLGATHER", "0", nullptr,
       nullptr},
      {"--torus-allreduce", V::kFlag, "HOROVOD_TORUS_ALLREDUCE", "1", nullptr, nullptr},
      {"--no-torus-allreduce", V::kFlag, "HOROVOD_TORUS_ALLREDUCE", "0", nullptr, nullptr},
      {"--autotune", V::kFlag, "HOROVOD_AUTOTUNE", "1", nullptr,
       "and the --autotune-* options apply"},
      {"--no-autotune", V::kFlag, nullptr, nullptr, nullptr, "no autotuning (Horovod's default)"},
      {"--autotune-log-file", V::kText, "HOROVOD_AUTOTUNE_LOG", nullptr, "--autotune", nullptr},
      {"--autotune-warmup-samples", V::kWhole, "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", nullptr,
       "--autotune", nullptr},
      {"--autotune-steps-per-sample", V::kWhole, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", nullptr,
       "--autotune", nullptr},
      {"--autotune-bayes-opt-max-samples", V::kWhole, "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES",
       nullptr, "--autotune", nullptr},
      {"--autotune-gaussian-process-noise", V::kNumber, "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE",
       nullptr, "--autotune", nullptr},
      {"--timeline-filename", V::kText, "HOROVOD_TIMELINE", nullptr, nullptr,
       "Horovod's rank-0 timeline in that file; not with --timeline, which keeps every rank's in "
       "the job folder"},
      {"--timeline-mark-cycles", V::kFlag, "HOROVOD_TIMELINE_MARK_CYCLES", "1",
       "--timeline-filename", nullptr},
      {"--no-timeline-mark-cycles", V::kFlag, "HOROVOD_TIMELINE_MARK_CYCLES", "0",
       "--timeline-filename", nullptr},
      {"--no-stall-check", V::kFlag, "HOROVOD_STALL_CHECK_DISABLE", "1", nullptr,
       "Horovod's own stall check, not dtrain's --stall-timeout"},
      {"--stall-check", V::kFlag, "HOROVOD_STALL_CHECK_DISABLE", "0", nullptr, nullptr},
      {"--stall-check-warning-time-seconds", V::kWhole, "HOROVOD_STALL_CHECK_TIME_SECONDS", nullptr,
       nullptr, nullptr},
      {"--stall-check-shutdown-time-seconds", V::kWhole, "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS",
       nullptr, nullptr, nullptr},
      {"--mpi-threads-disable", V::kFlag, "HOROVOD_MPI_THREADS_DISABLE", "1", nullptr, nullptr},
      {"--no-mpi-threads-disable", V::kFlag, "HOROVOD_MPI_THREADS_DISABLE", "0", nullptr, nullptr},
      {"--num-nccl-streams", V::kWhole, "HOROVOD_NUM_NCCL_STREAMS", nullptr, nullptr, nullptr},
      {"--tcp", V::kFlag, "NCCL_IB_DISABLE", "1", nullptr, "TCP, not InfiniBand"},
      {"--thread-affinity", V::kWhole, "HOROVOD_THREAD_AFFINITY", nullptr, nullptr, nullptr},
      {"--gloo-timeout-seconds", V::kWhole, "HOROVOD_GLOO_TIMEOUT_SECONDS", nullptr, nullptr,
       nullptr},
      {"--log-level", V::kLogLevel, "HOROVOD_LOG_LEVEL", nullptr, nullptr, nullptr},
      {"--log-with-timestamp", V::kFlag, "HOROVOD_LOG_HIDE_TIME", "0", nullptr, nullptr},
      {"--log-without-timestamp", V::kFlag, "HOROVOD_LOG_HIDE_TIME", "1", nullptr, nullptr},
  };
  return options;
}

std::string PythonFloatText(const std::string& text) {
  const double value = std::strtod(text.c_str(), nullptr);
  std::string out = fmt::format("{}", value);  // the shortest text that reads back, as repr()
  if (out.find_first_of(".einf") == std::string::npos) out += ".0";
  return out;
}

std::string HorovodrunHelp(const HorovodrunOption& option) {
  std::string help;
  if (option.variable) help = std::string(option.variable) + (option.set_to ? "=" : "");
  if (option.set_to) help += option.set_to;
  if (option.needs) help += std::string(" (with ") + option.needs + ")";
  if (option.more) help += (help.empty() ? "" : ": ") + std::string(option.more);
  return help;
}

std::vector<std::string> HorovodrunVariables(const std::map<std::string, std::string>& given,
                                             std::vector<std::string>& notes) {
  for (const auto& [yes, no] : kOpposites) {
    if (given.count(yes) && given.count(no)) {
      throw UsageError(fmt::format("{} and {} say opposite things; give one of them", yes, no));
    }
  }
  std::vector<std::string> out;
  std::string nics;
  for (const HorovodrunOption& option : HorovodrunOptions()) {
    auto it = given.find(option.name);
    if (it == given.end()) continue;
    if (option.needs && !given.count(option.needs)) {
      notes.push_back(
          fmt::format("{} is not used without {}, as under horovodrun", option.name, option.needs));
    } else if (option.value == V::kList) {
      nics += (nics.empty() ? "" : ",") + it->second;
    } else if (option.set_to) {
      out.push_back(std::string(option.variable) + "=" + option.set_to);
    } else if (std::string(option.name) == "--fusion-threshold-mb") {
      out.push_back(fmt::format("{}={}", option.variable, std::stoll(it->second) << 20));
    } else if (option.variable) {
      out.push_back(std::string(option.variable) + "=" + it->second);
    }
  }
  if (!nics.empty()) {
    out.push_back("HOROVOD_GLOO_IFACE=" + nics.substr(0, nics.find(',')));
    out.push_back("NCCL_SOCKET_IFNAME=" + nics);
  }
  return out;
}

}  // namespace dtrain
