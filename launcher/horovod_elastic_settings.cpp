// horovodrun's elastic options checked as its launch.py and HostState check them, and settled.
#include "launcher/horovod_elastic_settings.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "launcher/elastic_cooldown.h"
#include "launcher/error.h"

namespace dtrain {
namespace {

// The fewest ranks an elastic job goes on with: --min-np; with a discovery script and no
// --min-np, -np (horovodrun's default); 0: the job is not elastic.
int ElasticMinNp(const LaunchOptions& options) {
  if (options.min_np > 0 || options.host_discovery_script.empty()) return options.min_np;
  if (options.cluster.np > 0) return options.cluster.np;
  throw UsageError(
      "--host-discovery-script makes the job elastic: give --min-np N (the fewest ranks it goes "
      "on with) or -np N (the ranks it starts with)");
}

}  // namespace

int ElasticTimeoutS(const LaunchOptions& options) {
  if (options.elastic_timeout_s > 0) return options.elastic_timeout_s;
  const char* env = std::getenv("HOROVOD_ELASTIC_TIMEOUT");
  if (env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end == '\0' && v > 0 && v < 1000000) return static_cast<int>(v);
  }
  return 600;
}

void SettleElasticSettings(const LaunchOptions& options, const ClusterSpec& spec,
                           JobSettings& job) {
  if (options.min_np < 0 || options.max_np < 0)
    throw UsageError("--min-np/--max-np: expected a number of ranks >= 1");
  if (options.reset_limit < -1) throw UsageError("--reset-limit: expected a number >= 0");
  const int min_np = ElasticMinNp(options);
  if (options.slots_per_host < 0 || options.elastic_timeout_s < 0)
    throw UsageError("--slots-per-host/--elastic-timeout: expected a whole number >= 1");
  if (options.slots_per_host > 0 && options.host_discovery_script.empty()) {
    throw UsageError(
        "--slots-per-host goes with --host-discovery-script (horovodrun's elastic mode)");
  }
  if ((options.max_np > 0 || options.reset_limit >= 0 ||
       !options.blacklist_cooldown_range.empty() || options.elastic_timeout_s > 0) &&
      min_np == 0) {
    throw UsageError(
        "--max-np, --reset-limit, --blacklist-cooldown-range and --elastic-timeout are for an "
        "elastic Horovod job: give --min-np N too (the fewest ranks it goes on with)");
  }
  if (!options.blacklist_cooldown_range.empty()) {
    const std::vector<int>& range = options.blacklist_cooldown_range;
    // horovodrun's HostState._validate_cooldown_range: 1 s to an hour.
    if (range.size() != 2 || range[0] < kCooldownFloorS || range[1] > kCooldownCeilingS ||
        range[0] > range[1]) {
      throw UsageError(fmt::format(
          "--blacklist-cooldown-range: expected MIN MAX in seconds, {} <= MIN <= MAX <= {} (as "
          "horovodrun's)",
          kCooldownFloorS, kCooldownCeilingS));
    }
    job.cooldown_min_s = range[0];
    job.cooldown_max_s = range[1];
  }
  if (min_np > 0) {
    if (spec.transport == TransportKind::kSlurm) {
      throw UsageError(
          "--min-np: elastic Horovod runs on ssh nodes or this machine, not under Slurm (one "
          "srun step holds every rank, and a failed one ends it); use --nnodes MIN:MAX to restart "
          "on fewer nodes");
    }
    if (options.max_np > 0 && options.max_np < min_np)
      throw UsageError("--max-np must be at least --min-np");
    job.min_np = min_np;
    job.max_np = options.max_np;
    job.reset_limit = options.reset_limit;
    job.horovod = true;
    job.join_timeout_s = ElasticTimeoutS(options);
    job.join_timeout_named = "horovodrun's --elastic-timeout S";
    job.join_timeout_option = "--elastic-timeout S";
    // Below --min-np, the ranks wait for nodes as horovodrun's driver does, when a node can join.
    if (!options.host_discovery_script.empty() || job.cooldown_min_s > 0)
      job.nodes_wait_s = ElasticTimeoutS(options);
    // A stalled rank's node leaves an elastic job under --on-stall stop. The ranks waiting for it
    // recover once their own Gloo timeout ended the wait; ended under them while they wait,
    // Horovod 0.28's background loop stops on the broken connection and they hang.
    if (options.on_stall == "stop" && job.stall_timeout_s > 0) {
      const auto named = spec.env.find("HOROVOD_GLOO_TIMEOUT_SECONDS");
      const double gloo_s = named == spec.env.end() ? 30 : std::atof(named->second.c_str());
      if (job.stall_timeout_s <= gloo_s) {
        std::fprintf(
            stderr,
            "dtrain: warning: --stall-timeout %g is not longer than Horovod's Gloo "
            "timeout (%g s%s): the ranks waiting for a stalled rank may hang when its "
            "node leaves the elastic job; give a --stall-timeout longer than it\n",
            job.stall_timeout_s, gloo_s,
            named == spec.env.end() ? ", Horovod's default" : ", HOROVOD_GLOO_TIMEOUT_SECONDS");
      }
    }
  }
}

}  // namespace dtrain
