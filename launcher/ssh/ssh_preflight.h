// The check before a launch: every SSH node is connected to at once, its host key verified and
// the login tried, before the first rank starts anywhere. One bad node then stops the launch
// with nothing started, instead of being found when its rank starts and the others are running.
#pragma once

#include "launcher/cluster_spec.h"

namespace dtrain {

// What dtrain exits with when a node cannot be used: ssh's own status for a failed connection,
// and what a rank the transport could not start reports (ExitStatus::ShellStatus).
constexpr int kExitNodeUnusable = 255;

// For an ssh cluster: connects to every node in parallel (each within its connect timeout) and
// throws Error(kExitNodeUnusable) naming each node that failed (a changed or unknown host key
// with both fingerprints and the fix, refused login, no answer) and the cluster file. An
// interrupt meanwhile throws Error(128 + signal). Other transports: nothing to check here.
void PreflightSshNodes(const ClusterSpec& spec);

}  // namespace dtrain
