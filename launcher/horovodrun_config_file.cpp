#include "launcher/horovodrun_config_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "launcher/error.h"
#include "launcher/horovodrun_options.h"

namespace dtrain {
namespace {

// A key of the file and the option it stands for: a value's, or a yes and a no for a boolean.
struct ConfigKey {
  const char* section;
  const char* key;
  const char* option;     // the value's option, or the one `true` gives
  const char* option_no;  // the one `false` gives; nullptr: the key holds a value
};

constexpr ConfigKey kKeys[] = {
    {"params", "fusion_threshold_mb", "--fusion-threshold-mb", nullptr},
    {"params", "cycle_time_ms", "--cycle-time-ms", nullptr},
    {"params", "cache_capacity", "--cache-capacity", nullptr},
    {"params", "hierarchical_allreduce", "--hierarchical-allreduce", "--no-hierarchical-allreduce"},
    {"params", "hierarchical_allgather", "--hierarchical-allgather", "--no-hierarchical-allgather"},
    {"params", "torus_allreduce", "--torus-allreduce", "--no-torus-allreduce"},
    {"autotune", "enabled", "--autotune", "--no-autotune"},
    {"autotune", "log_file", "--autotune-log-file", nullptr},
    {"autotune", "warmup_samples", "--autotune-warmup-samples", nullptr},
    {"autotune", "steps_per_sample", "--autotune-steps-per-sample", nullptr},
    {"autotune", "bayes_opt_max_samples", "--autotune-bayes-opt-max-samples", nullptr},
    {"autotune", "gaussian_process_noise", "--autotune-gaussian-process-noise", nullptr},
    {"timeline", "filename", "--timeline-filename", nullptr},
    {"timeline", "mark_cycles", "--timeline-mark-cycles", "--no-timeline-mark-cycles"},
    {"stall_check", "enabled", "--stall-check", "--no-stall-check"},
    {"stall_check", "warning_time_seconds", "--stall-check-warning-time-seconds", nullptr},
    {"stall_check", "shutdown_time_seconds", "--stall-check-shutdown-time-seconds", nullptr},
    {"library_options", "mpi_threads_disable", "--mpi-threads-disable", "--no-mpi-threads-disable"},
    {"library_options", "num_nccl_streams", "--num-nccl-streams", nullptr},
    {"library_options", "thread_affinity", "--thread-affinity", nullptr},
    {"library_options", "gloo_timeout_seconds", "--gloo-timeout-seconds", nullptr},
    {"logging", "level", "--log-level", nullptr},
    {"logging", "with_timestamp", "--log-with-timestamp", "--log-without-timestamp"},
};

std::string Where(const std::string& path, const YAML::Mark& mark) {
  return fmt::format("{}:{}:{}", path, mark.line + 1, mark.column + 1);
}

// Why `value` is not what `option` takes, or "".
std::string Refusal(const std::string& option, const std::string& value) {
  for (const HorovodrunOption& o : HorovodrunOptions()) {
    if (option != o.name) continue;
    char* end = nullptr;
    switch (o.value) {
      case HorovodrunValue::kWhole:
        if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos ||
            value.size() > 9)
          return "expected a whole number >= 0";
        return "";
      case HorovodrunValue::kNumber:
        if (std::strtod(value.c_str(), &end) < 0 || value.empty() || *end != '\0')
          return "expected a number >= 0";
        return "";
      case HorovodrunValue::kLogLevel:
        for (const std::string& level : kHorovodLogLevels) {
          if (value == level) return "";
        }
        return fmt::format("expected {} or {}",
                           fmt::join(kHorovodLogLevels.begin(), kHorovodLogLevels.end() - 1, ", "),
                           kHorovodLogLevels.back());
      default:
        return value.empty() ? "expected a value" : "";
    }
  }
  return "";
}

void ReadKey(const std::string& path, const ConfigKey& k, const YAML::Node& node,
             std::map<std::string, std::string>& given) {
  const std::string name = std::string(k.section) + "." + k.key;
  if (!node.IsScalar()) {
    throw UsageError(fmt::format("{}: {}: expected a single value, as horovodrun reads it",
                                 Where(path, node.Mark()), name));
  }
  if (given.count(k.option) || (k.option_no && given.count(k.option_no)))
    return;  // the
             // command line's
  if (!k.option_no) {
    const std::string value = node.Scalar();
    if (const std::string why = Refusal(k.option, value); !why.empty()) {
      throw UsageError(
          fmt::format("{}: {}: {}, got '{}'", Where(path, node.Mark()), name, why, value));
    }
    given[k.option] = value;
    return;
  }
  bool yes = false;
  if (!YAML::convert<bool>::decode(node, yes)) {
    throw UsageError(fmt::format("{}: {}: expected true or false, got '{}'",
                                 Where(path, node.Mark()), name, node.Scalar()));
  }
  given[yes ? k.option : k.option_no] = "";
}

}  // namespace

void ReadHorovodrunConfig(const std::string& path, std::map<std::string, std::string>& given,
                          std::vector<std::string>& notes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UsageError(
        fmt::format("--config-file {}: cannot read it: {}", path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    throw UsageError(Where(path, e.mark) + ": not valid YAML: " + e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) {
    throw UsageError(path +
                     ": expected horovodrun's config file: sections such as params:, "
                     "autotune:, timeline:");
  }
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    if (name == "controller") {
      const std::string controller = section.second.IsScalar() ? section.second.Scalar() : "";
      if (controller != "gloo" && controller != "Gloo" && controller != "GLOO") {
        throw UsageError(fmt::format(
            "{}: controller: {}: dtrain starts every rank itself and serves Horovod's Gloo "
            "rendezvous (controller: gloo); there is no mpirun",
            Where(path, section.second.Mark()), controller));
      }
      continue;
    }
    bool known_section = false;
    for (const ConfigKey& k : kKeys) known_section = known_section || name == k.section;
    if (!known_section || !section.second.IsMap()) {
      notes.push_back(fmt::format("{}: {} is not one of horovodrun's config sections; not used",
                                  Where(path, section.first.Mark()), name));
      continue;
    }
    // horovodrun turns Horovod's stall check on for a stall_check section without `enabled`.
    if (name == "stall_check" && !section.second["enabled"] && !given.count("--no-stall-check"))
      given.emplace("--stall-check", "");
    for (const auto& entry : section.second) {
      const std::string key = entry.first.Scalar();
      const ConfigKey* found = nullptr;
      for (const ConfigKey& k : kKeys) {
        if (name == k.section && key == k.key) found = &k;
      }
      if (!found) {
        notes.push_back(fmt::format("{}: {}.{} is not one of horovodrun's config keys; not used",
                                    Where(path, entry.first.Mark()), name, key));
        continue;
      }
      ReadKey(path, *found, entry.second, given);
    }
  }
}

}  // namespace dtrain
