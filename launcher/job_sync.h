// `dtrain launch --sync` at the job's start and before each restart (the copying itself, and the
// nodes synced in the job, are LaunchDirSync's, launcher/ssh/launch_dir_sync.h).
#pragma once

#include <memory>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/job_attempt.h"
#include "launcher/job_record.h"
#include "launcher/launch.h"
#include "launcher/ssh/launch_dir_sync.h"

namespace dtrain {

// The launch directory to every node of `spec` (the reached ssh nodes) before any rank starts;
// null when there is nothing to copy (no --sync, or nodes that share this machine's files).
// Throws Error, the job's record saying so first, when a node cannot be synced.
std::unique_ptr<LaunchDirSync> SyncLaunchDir(const LaunchOptions& options, const ClusterSpec& spec,
                                             const JobFolder& folder, JobRecord& record);

// Before a restart: the picked `nodes` not synced yet get the launch directory; one that cannot
// be synced is quarantined and the pool picks again. Returns the nodes to run on; throws Error
// when the pool runs short.
std::vector<int> SyncPicked(Job& job, std::vector<int> nodes);

}  // namespace dtrain
