#include "launcher/job_sync.h"

#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "launcher/error.h"
#include "launcher/job_placement.h"
#include "launcher/job_supervisor.h"
#include "launcher/node_health_checks.h"

namespace dtrain {

// --sync: the launch directory to every reached ssh node before any rank starts; null when there
// is nothing to copy (no --sync, or nodes that share this machine's files). Later nodes are synced
// when they first take part (LaunchDirSync).
std::unique_ptr<LaunchDirSync> SyncLaunchDir(const LaunchOptions& options, const ClusterSpec& spec,
                                             const JobFolder& folder, JobRecord& record) {
  if (!options.sync) return nullptr;
  if (spec.transport != TransportKind::kSsh) {
    std::fprintf(stderr,
                 "dtrain: --sync: a %s cluster shares this machine's files: nothing to copy\n",
                 TransportName(spec.transport));
    return nullptr;
  }
  auto sync = std::make_unique<LaunchDirSync>(folder.launch_dir, folder.log_dir);
  if (!sync->SyncNow(spec, ::isatty(STDERR_FILENO)).empty()) {
    StopIfInterruptedBeforeStart(folder.job_dir, record, "during --sync");
    RecordFailureBeforeStart(folder.job_dir, record, kExitFailure);
    throw Error("--sync: the workdir could not be copied to every node; no rank was started");
  }
  return sync;
}

// --sync before a restart: the picked nodes the launch directory was not copied to yet
// (unreached at the start, spares) get it first; a node it cannot reach is quarantined and
// another picked.
std::vector<int> SyncPicked(Job& job, std::vector<int> nodes) {
  for (;;) {
    const std::map<std::string, std::string> failed =
        job.dir_sync->SyncNow(AttemptSpec(job.spec, nodes));
    // Cut short by Ctrl-C: no node is blamed, and the attempt that follows starts no rank.
    if (failed.empty() || JobSupervisor::InterruptSignal() != 0) return nodes;
    for (const auto& [host, why] : failed) {
      Quarantine(job, NodeIndex(job.spec, host),
                 "the launch directory could not be copied to it (--sync): " + why);
    }
    nodes = job.pool.Pick();
    if (nodes.empty()) {
      RecordFailureBeforeStart(job.folder.job_dir, job.record, kExitFailure);
      throw Error("job " + job.record.name + " cannot go on: " + job.pool.why_not() +
                  " after --sync failed on node(s) it picked; fix them and run `dtrain sync`");
    }
  }
}

}  // namespace dtrain
