// The check before a launch: every SSH node is connected to at once, its host key verified and
// the login tried, before the first rank starts anywhere. One bad node then stops the launch
// with nothing started, instead of being found when its rank starts and the others are running.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "launcher/cluster_spec.h"

namespace dtrain {

// What dtrain exits with when a node cannot be used: ssh's own status for a failed connection,
// and what a rank the transport could not start reports (ExitStatus::ShellStatus).
constexpr int kExitNodeUnusable = 255;

// Nodes that could not be reached: host -> the error naming it.
using UnreachedNodes = std::map<std::string, std::string>;

// For an ssh cluster: connects to every node in parallel (each within its connect timeout) and
// throws Error(kExitNodeUnusable) naming each node that failed (a changed or unknown host key
// with both fingerprints and the fix, refused login, no answer) and the cluster file. When every
// failed node is one that could not be reached (no answer, connection refused, a name that does
// not resolve) and `go_on_without` says the job can run without them (spares, --nnodes MIN),
// they are returned instead; a node that answered wrongly (host key, login) always stops the
// launch. An interrupt meanwhile throws Error(128 + signal). Other transports: nothing to check.
UnreachedNodes PreflightSshNodes(
    const ClusterSpec& spec,
    const std::function<bool(const UnreachedNodes&)>& go_on_without = nullptr);

}  // namespace dtrain
