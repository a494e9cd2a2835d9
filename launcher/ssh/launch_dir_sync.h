// `dtrain launch --sync` over the job's life: the launch directory is copied to a node before its
// ranks first start there, not only to the nodes reached at the start. A node unreached then and
// picked by a later attempt, or one an elastic Horovod job takes in while it runs (listed later
// by --host-discovery-script, back after its cooldown), is synced first (workdir_sync.h); a node
// synced once is not synced again in the job.
#pragma once

#include <chrono>
#include <future>
#include <map>
#include <set>
#include <string>

#include "launcher/cluster_spec.h"
#include "launcher/ssh/workdir_sync.h"

namespace dtrain {

class LaunchDirSync {
 public:
  // `source`: the launch directory; `exclude`: the job's log folder inside it.
  LaunchDirSync(std::string source, std::string exclude);
  ~LaunchDirSync();  // waits for a sync still running
  LaunchDirSync(const LaunchDirSync&) = delete;
  LaunchDirSync& operator=(const LaunchDirSync&) = delete;

  // Copies to every node of `spec` not synced yet, all at once, and waits (said on stderr, one
  // line a node; `progress`: a progress line meanwhile, for a terminal). Returns the nodes that
  // failed: host -> why. Ctrl-C cuts it short (JobSupervisor::InterruptSignal), every node not
  // done failing.
  std::map<std::string, std::string> SyncNow(const ClusterSpec& spec, bool progress = false);

  // For a node about to join a running job, without blocking: kSynced once it is (the first call
  // starts its sync on a thread of its own), kBusy meanwhile, kFailed with `why` while its last
  // sync failed (said on stderr when it did; a call kRetryS later tries again). `spec`: the job's
  // cluster.
  enum class State { kSynced, kBusy, kFailed };
  State Poll(const ClusterSpec& spec, const std::string& host, std::string& why);

  static constexpr double kRetryS = 30;

 private:
  struct Failure {
    std::string why;
    std::chrono::steady_clock::time_point at;
  };

  SyncOptions options_;
  std::set<std::string> synced_;
  std::map<std::string, std::future<SyncReport>> running_;
  std::map<std::string, Failure> failed_;
};

}  // namespace dtrain
