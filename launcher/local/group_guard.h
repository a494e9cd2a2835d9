// The guard that stops a rank's whole process group when dtrain dies outright (SIGKILL, the OOM
// killer). The kernel's parent-death signal reaches only a direct child, so a rank's own
// children (data loader workers, a wrapper script's python) would live on, holding GPUs. The
// process dtrain starts for a rank therefore forks once more: the child goes on to exec the rank
// command, and the parent stays behind as the guard, in the same process group. The guard waits;
// when the rank ends it ends the same way (exit code or signal, so dtrain sees the rank's status
// under the pid it started), and when dtrain is gone it SIGKILLs the whole group. The guard is
// also the subreaper of the rank's descendants, so one that left the group (setsid) is handed to
// it when its parent dies, and killed too: when dtrain is gone, and when the rank itself ends
// (a rank that failed, or one stopped at teardown), before the guard reports its end. Not
// covered here: when dtrain SIGKILLs the whole group after the grace period the guard dies at
// once, and a descendant that left the group lives on (the rank's cgroup, where it has one, and
// launcher/local/rank_orphans.h end it).
#pragma once

#include <sys/types.h>

namespace dtrain {

// Called in the freshly forked child, after it has made its own process group and set up its
// file descriptors and signals, before exec. Returns in the process that is to exec the rank;
// the guard never returns. `launcher` is dtrain's pid. Only async-signal-safe calls are made, as
// the child of a multithreaded process requires. If the second fork fails there is no guard:
// the rank then at least dies with dtrain.
void SplitIntoGuardAndRank(pid_t launcher);

}  // namespace dtrain
