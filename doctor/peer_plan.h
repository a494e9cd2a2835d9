// Which nodes each node of the peer test (peer_run.h) connects to. Before a start, and in the
// doctor, every node to every other, as Gloo's full mesh does at init. The health watch repeats
// the test every round beside the job, where n * (n - 1) connections (65,280 at 256 nodes, a
// thread each) would cost the nodes what they are there for: there each node connects to a few,
// its next node in the ring and `partners - 1` more at offsets that move on each round. A node
// then has at least two partners each round (the one before it and the one after), so one that is
// cut off still fails with every partner while they connect with others, and every pair of nodes
// is tested within RoundsToCoverAll rounds. Pure logic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "launcher/cluster_spec.h"  // kPeerPartnersVariable, which sets PeerPlan::partners

namespace dtrain {

// Connections each node makes per round of the health watch by default.
constexpr size_t kWatchPeerPartners = 4;

struct PeerPlan {
  size_t partners = 0;  // connections each node makes; 0: one to every other node
  uint64_t round = 0;   // which offsets: the next round tests the next ones
};

// The ring offsets (from 1 to n / 2) the nodes connect at in this round: 1 and `partners - 1`
// more, taken in turn from 2 to n / 2. Empty when the plan tests every pair (no `partners`, or
// as many as n / 2).
std::vector<size_t> PeerOffsets(size_t n, const PeerPlan& plan);

// targets[k]: the positions (0 to n - 1) node k connects to, in ascending order.
std::vector<std::vector<size_t>> PeerTargets(size_t n, const PeerPlan& plan);

// How many rounds in a row test every pair at least once (1 for every pair at once).
size_t RoundsToCoverAll(size_t n, const PeerPlan& plan);

// The plan of the health watch's round `round` on `spec`: the cluster file's
// DTRAIN_PROBE_PEERS_PARTNERS (checked when the file was read), else kWatchPeerPartners.
PeerPlan WatchPeerPlan(const ClusterSpec& spec, uint64_t round);

// The doctor's plan: every pair, unless the cluster file's env sets DTRAIN_PROBE_PEERS_PARTNERS
// (then that many, from round `round`).
PeerPlan DoctorPeerPlan(const ClusterSpec& spec, uint64_t round);

}  // namespace dtrain
