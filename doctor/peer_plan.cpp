// The peer test's plan: who connects to whom (peer_plan.h).
#include "doctor/peer_plan.h"

#include <algorithm>
#include <string>

namespace dtrain {

namespace {

// Offsets after the ring's: 2 to n / 2 (a pair of nodes is at one of the offsets 1 to n / 2 from
// one of them, around the ring).
size_t MovingOffsets(size_t n) {
  return n / 2 >= 2 ? n / 2 - 1 : 0;
}

// Whether `plan` tests every pair at once on n nodes.
bool EveryPair(size_t n, const PeerPlan& plan) {
  return plan.partners == 0 || plan.partners - 1 >= MovingOffsets(n);
}

// The cluster file's DTRAIN_PROBE_PEERS_PARTNERS; 0 when unset or not a number of at least
// kMinPeerPartners (the cluster file's reader refuses those; a spec built in code may hold one).
size_t PartnersSet(const ClusterSpec& spec) {
  auto it = spec.env.find(kPeerPartnersVariable);
  return it == spec.env.end() ? 0 : ParsePeerPartners(it->second);
}

}  // namespace

std::vector<size_t> PeerOffsets(size_t n, const PeerPlan& plan) {
  if (EveryPair(n, plan)) return {};
  const size_t moving = MovingOffsets(n);
  const size_t per_round = plan.partners - 1;
  std::vector<size_t> offsets = {1};
  const uint64_t first = (plan.round % moving) * per_round % moving;
  for (size_t k = 0; k < per_round; ++k) offsets.push_back(2 + (first + k) % moving);
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}

std::vector<std::vector<size_t>> PeerTargets(size_t n, const PeerPlan& plan) {
  std::vector<std::vector<size_t>> targets(n);
  const std::vector<size_t> offsets = PeerOffsets(n, plan);
  for (size_t k = 0; k < n; ++k) {
    if (offsets.empty()) {
      for (size_t j = 0; j < n; ++j) {
        if (j != k) targets[k].push_back(j);
      }
      continue;
    }
    for (size_t d : offsets) targets[k].push_back((k + d) % n);
    std::sort(targets[k].begin(), targets[k].end());
  }
  return targets;
}

size_t RoundsToCoverAll(size_t n, const PeerPlan& plan) {
  if (EveryPair(n, plan)) return 1;
  const size_t per_round = plan.partners - 1;
  return (MovingOffsets(n) + per_round - 1) / per_round;
}

PeerPlan WatchPeerPlan(const ClusterSpec& spec, uint64_t round) {
  const size_t set = PartnersSet(spec);
  return {set ? set : kWatchPeerPartners, round};
}

PeerPlan DoctorPeerPlan(const ClusterSpec& spec, uint64_t round) {
  return {PartnersSet(spec), round};
}

}  // namespace dtrain
