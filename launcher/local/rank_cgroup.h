// A cgroup of its own for each local rank, where this machine allows it: cgroup v2 mounted and
// this process allowed to make a cgroup below its own (root, or a user whose cgroup is delegated).
// Every process in it is the rank's, whatever its process group, session or environment, so a
// descendant that left the rank's session and replaced its environment (`setsid env -i`, Python's
// Popen(env=..., start_new_session=True)) is still found: when the rank's guard was SIGKILLed at
// the end of the grace period (launcher/local/group_guard.h) it is killed with the attempt, not
// only when dtrain exits (launcher/local/rank_orphans.h). No controller is enabled in it: limits
// and accounting stay those of dtrain's own cgroup. Where a cgroup cannot be made, nothing
// changes.
#pragma once

#include <string>

namespace dtrain {

// The variable that, set to 0 in a rank's environment (the cluster file's `env`), keeps its
// rank out of a cgroup of its own, locally and on SSH nodes alike (launcher/ssh/remote_command).
constexpr const char* kRankCgroupSwitch = "DTRAIN_RANK_CGROUP";

class RankCgroup {
 public:
  RankCgroup() = default;
  // Makes `<dtrain's cgroup>/dtrain-rank-<pid>-<suffix>` (pid: this process's); ok() is false
  // where it cannot. The first one a process makes also removes the empty cgroups that dtrain
  // processes killed outright left behind.
  explicit RankCgroup(const std::string& suffix);
  ~RankCgroup();  // Kill(), then removes the cgroup (for at most about 1 s while it empties)
  RankCgroup(RankCgroup&& other) noexcept;
  RankCgroup& operator=(RankCgroup&& other) noexcept;
  RankCgroup(const RankCgroup&) = delete;
  RankCgroup& operator=(const RankCgroup&) = delete;

  bool ok() const { return !dir_.empty(); }
  // The file a process writes "0" to, to move itself in ("" without a cgroup). Held here so that
  // a freshly forked child can use it without allocating.
  const std::string& procs_file() const { return procs_file_; }
  // SIGKILLs every process in it (cgroup.kill); false without a cgroup or where the kernel has
  // no cgroup.kill (before Linux 5.14).
  bool Kill() const;

 private:
  void Remove();
  std::string dir_;
  std::string procs_file_;
};

// In a freshly forked child: moves the calling process into the cgroup whose cgroup.procs is
// `procs_file` (nothing when it is empty or cannot be written). Async-signal-safe.
void JoinCgroup(const char* procs_file);

}  // namespace dtrain
