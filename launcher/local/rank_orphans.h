// RankOrphans: the local transport's last line of defence for descendants of a rank that left
// its process group (setsid) and outlived the rank's guard (launcher/local/group_guard.h). The guard
// kills them when the rank ends or dtrain dies, but when dtrain SIGKILLs a group after the grace
// period the guard dies with it. dtrain is therefore the subreaper of everything it starts: such
// a descendant is handed to dtrain when its parent dies, and is killed when the transport ends.
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

}  // namespace dtrain
