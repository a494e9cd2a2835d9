// horovodrun's elastic options for `dtrain launch` (--min-np, --max-np, --reset-limit,
// --blacklist-cooldown-range, --host-discovery-script, --slots-per-host, --elastic-timeout):
// checked against each other and the cluster, and settled into the job's settings.
#pragma once

#include "launcher/cluster_spec.h"
#include "launcher/job_attempt.h"
#include "launcher/launch.h"

namespace dtrain {

// Throws UsageError when the options contradict each other or the cluster (Slurm); sets `job`'s
// min_np, max_np, reset_limit, cooldown, nodes_wait_s and horovod. `job.stall_timeout_s` must be
// settled first (a warning compares it with Horovod's Gloo timeout).
void SettleElasticSettings(const LaunchOptions& options, const ClusterSpec& spec, JobSettings& job);

// --elastic-timeout (how long the start waits for the discovery script's nodes, and the ranks
// for nodes to join when fewer than --min-np remain): the option, else HOROVOD_ELASTIC_TIMEOUT,
// else horovodrun's 600 s.
int ElasticTimeoutS(const LaunchOptions& options);

}  // namespace dtrain
