// The rule about a node's neighbour tables (ARP for IPv4, NDISC for IPv6). The kernel keeps one
// table per family for the whole machine; past gc_thresh3 entries it adds none ("neighbor table
// overflow!"), so an address the node has not resolved lately cannot be, and a connection to it
// times out after a few seconds of unanswered ARP: NCCL's and Gloo's init wait, the peer test
// names pairs. A node that talks to many peers over several interfaces (every rank to every
// other, one address per NIC) outgrows the default 1024 at a few hundred nodes.
#include <algorithm>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"

namespace dtrain {

using checks::Make;
using checks::Reached;
using checks::Times;

namespace {

// The limits to suggest: four times the last one (at least 4096), the soft limit half of it, the
// floor an eighth.
constexpr long long kSuggestedFactor = 4;
constexpr long long kSuggestedMinimum = 4096;

std::string SysctlPrefix(const NeighbourTable& t) {
  return t.family == "IPv6" ? "net.ipv6.neigh.default." : "net.ipv4.neigh.default.";
}

std::string TableName(const NeighbourTable& t) {
  return fmt::format("{} neighbour ({}) table", t.family, t.family == "IPv6" ? "NDISC" : "ARP");
}

std::string RaiseLimits(const NeighbourTable& t) {
  const long long third = std::max(kSuggestedMinimum, kSuggestedFactor * t.gc_thresh3);
  const std::string p = SysctlPrefix(t);
  return fmt::format(
      "raise its limits above the addresses the node talks to (every peer's, on every interface "
      "the job uses; containers' entries count too): `sysctl -w {0}gc_thresh1={1} "
      "{0}gc_thresh2={2} {0}gc_thresh3={3}`, and keep them in /etc/sysctl.d/",
      p, third / 8, third / 2, third);
}

}  // namespace

std::vector<Finding> CheckNeighbourTables(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    for (const NeighbourTable& t : n->health.neighbour_tables) {
      if (t.entries < 0 || t.gc_thresh3 <= 0) continue;
      // Full now: an address not resolved lately cannot be, so the node is unfit. Full at some
      // time since boot is a warning: the kernel collects stale entries (those past gc_thresh2
      // first), and quarantining a node for what may be over would cost more than it saves.
      const bool full_now = t.entries >= t.gc_thresh3;
      if (!full_now && t.fulls <= 0) continue;
      const std::string now =
          fmt::format("{} entries now, limits {}gc_thresh2 {} and gc_thresh3 {}", t.entries,
                      SysctlPrefix(t), t.gc_thresh2, t.gc_thresh3);
      if (full_now) {
        const std::string past =
            t.fulls > 0 ? fmt::format(
                              "; it was full {} since boot (\"neighbor table overflow!\" "
                              "in the kernel log)",
                              Times(t.fulls))
                        : "";
        out.push_back(
            Make(Severity::kError, "neighbour-table", "", {n->host},
                 fmt::format("node {}: its {} is full: {}{}; an address it has not resolved "
                             "lately cannot be, and a connection to it times out (NCCL's and "
                             "Gloo's init, the peer test)",
                             n->host, TableName(t), now, past),
                 RaiseLimits(t)));
        continue;
      }
      const bool past_soft_limit = t.gc_thresh2 > 0 && t.entries >= t.gc_thresh2;
      out.push_back(Make(
          Severity::kWarning, "neighbour-table", "", {n->host},
          fmt::format("node {}: its {} was full {} since boot (\"neighbor table overflow!\" in "
                      "the kernel log; {}{}): while it was, new peers could not be reached",
                      n->host, TableName(t), Times(t.fulls), now,
                      past_soft_limit ? ", past the soft limit, where the kernel must collect "
                                        "entries to add one"
                                      : ""),
          RaiseLimits(t)));
    }
  }
  return out;
}

}  // namespace dtrain
