// RankOrphans: the local transport's last line of defence for descendants of a rank that left
// its process group (setsid) and outlived the rank's guard (launcher/local/group_guard.h). The
// guard kills them when the rank ends or dtrain dies, but when dtrain SIGKILLs a group after the
// grace period the guard dies with it. dtrain is therefore the subreaper of everything it starts:
// such a descendant is handed to dtrain when its parent dies, and is killed when the transport
// ends. Where each rank has a cgroup (launcher/local/rank_cgroup.h), the transport's end kills such
// a descendant through it whatever its environment; this is for machines where it has none.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "launcher/transport.h"

namespace dtrain {

class RankOrphans {
 public:
  // Makes this process the subreaper of its descendants and notes the job folders
  // (DTRAIN_LOG_DIR, unique to a job) of `procs`, by which an orphan is recognised.
  void Adopt(const std::vector<ProcessSpec>& procs);
  // SIGKILLs and reaps every child of this process whose environment has DTRAIN_LOG_DIR=<a
  // noted folder>, until no process with it is left (for at most about 2 s). Other children
  // (other jobs, probes) are left alone; so is a descendant that replaced its environment.
  void KillAll() const;

 private:
  std::set<std::string> jobs_;
};

// Kills every child this process still has, with its process group, and reaps them, until none
// is left (for at most about 2 s). For the end of a launch, once every process it started has
// ended and been reaped: a child left then is one a dying process of the job handed to dtrain as
// the subreaper (RankOrphans::Adopt). KillAll finds the job's processes by their environment;
// this finds them whatever it is, so a descendant that left the rank's session and replaced its
// environment (`setsid env -i ...`, Python's Popen(env=..., start_new_session=True)) goes too.
// Does nothing where this process is not a subreaper.
void KillAdoptedChildren();

// Calls KillAdoptedChildren() when the scope it is declared in ends (first in the scope, so that
// every process the scope started has ended before).
struct KillAdoptedChildrenAtScopeEnd {
  KillAdoptedChildrenAtScopeEnd() = default;
  KillAdoptedChildrenAtScopeEnd(const KillAdoptedChildrenAtScopeEnd&) = delete;
  KillAdoptedChildrenAtScopeEnd& operator=(const KillAdoptedChildrenAtScopeEnd&) = delete;
  ~KillAdoptedChildrenAtScopeEnd() { KillAdoptedChildren(); }
};

}  // namespace dtrain
