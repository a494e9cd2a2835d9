// The peer connection test's verdict (peer_run.h): which node, or which pair of nodes, cannot
// connect at the addresses the job's collectives use. A node whose every pair fails while other
// pairs connect is the one cut off, and named alone (so --exclude-bad and the launch leave out
// only it); a failing pair that no cut-off node explains names both of its nodes, as does the
// one pair of a two-node test. Two nodes with one address are named too.
#pragma once

#include <vector>

#include "doctor/checks.h"
#include "doctor/peer_run.h"

namespace dtrain {

// Errors for the nodes and pairs that cannot connect, warnings for what could not be tested (a
// port a node could not listen on, a node without Python), and an ok line when every pair
// connected. Nothing when the test did not run.
std::vector<Finding> CheckPeerConnections(const PeerRun& run, const std::vector<NodeFacts>& nodes);

}  // namespace dtrain
