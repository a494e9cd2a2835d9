// The peer connection test's verdict (peer_verdict.h).
#include "doctor/peer_verdict.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/interface_match.h"

namespace dtrain {

using checks::Join;
using checks::Make;

namespace {

// How the test's addresses were picked, for messages: "over hsn0" where the job's variables name
// interfaces, else "at their addresses in the cluster file".
std::string Over(const PeerRun& run) {
  std::set<std::string> names;
  for (const auto& list : run.endpoints) {
    for (const CollectiveEndpoint& e : list) {
      if (!e.interface.empty()) names.insert(e.interface);
    }
  }
  if (names.empty()) return "at their addresses in the cluster file";
  return fmt::format("over {} ({})", Join({names.begin(), names.end()}), Join(run.variables));
}

// "node0 -> node2 10.232.0.12: unreachable (No route to host)".
std::string Describe(const PeerConnection& c, const std::vector<NodeFacts>& nodes) {
  std::string why = c.result;
  if (c.result == "wrong-node") {
    size_t other = 0;
    try {
      other = std::stoul(c.detail);
    } catch (const std::exception&) {
      other = nodes.size();
    }
    why = fmt::format("{} answered there", other < nodes.size() ? nodes[other].host : c.detail);
  } else if (!c.detail.empty()) {
    why += " (" + c.detail + ")";
  }
  auto host = [&](size_t i) { return i < nodes.size() ? nodes[i].host : std::to_string(i); };
  return fmt::format("{} -> {} {}: {}", host(c.from), host(c.to), c.address, why);
}

// The failed connections, up to three, for one message.
std::string Examples(const std::vector<const PeerConnection*>& failed,
                     const std::vector<NodeFacts>& nodes) {
  std::vector<std::string> said;
  for (size_t k = 0; k < failed.size() && k < 3; ++k) said.push_back(Describe(*failed[k], nodes));
  if (failed.size() > 3) said.push_back(fmt::format("and {} more", failed.size() - 3));
  return Join(said, "; ");
}

bool Failed(const PeerConnection& c) {
  return !c.result.empty() && c.result != "ok" && c.result != "no-answer";
}

constexpr const char* kCutOffRemedy =
    "look at the node's link beyond the node itself: its switch port (VLAN, port state), a "
    "firewall on it (`iptables -S`, `nft list ruleset`), its address and subnet (`ip -br addr`) "
    "and the route from another node (`ip route get ADDRESS`); dtrain doctor --exclude-bad "
    "leaves it out";

}  // namespace

std::vector<Finding> CheckPeerConnections(const PeerRun& run, const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  const std::string over = Over(run);
  const size_t n = std::min(nodes.size(), run.endpoints.size());

  // Two nodes with one address: a connection to either may reach the other, or the node itself
  // (a container bridge that every node has alike, NCCL's own pick).
  std::map<std::string, std::vector<size_t>> by_address;
  std::map<std::string, std::set<std::string>> interfaces;
  for (size_t i = 0; i < n; ++i) {
    for (const CollectiveEndpoint& e : run.endpoints[i]) {
      by_address[e.address].push_back(i);
      if (!e.interface.empty()) interfaces[e.address].insert(e.interface);
    }
  }
  const bool own_pick =
      std::find(run.variables.begin(), run.variables.end(), kNcclOwnPick) != run.variables.end();
  for (const auto& [address, holders] : by_address) {
    if (holders.size() < 2) continue;
    std::vector<std::string> names;
    for (size_t i : holders) names.push_back(nodes[i].host);
    const std::set<std::string>& on = interfaces[address];
    out.push_back(Make(
        Severity::kError, "peers", "", names,
        fmt::format("nodes {} all have the address {}{}{}: the collectives' connections to one of "
                    "them reach another, or the node itself",
                    Join(names), address, on.empty() ? "" : " on " + Join({on.begin(), on.end()}),
                    own_pick ? ", which NCCL picks with NCCL_SOCKET_IFNAME unset" : ""),
        own_pick ? fmt::format("set NCCL_SOCKET_IFNAME (env: in the cluster file) to the interface "
                               "the nodes reach each other on, or leave this one out: "
                               "NCCL_SOCKET_IFNAME=^{},docker,lo,virbr",
                               on.empty() ? std::string("br-") : *on.begin())
                 : "give every node its own address (a cloned node keeps its image's static "
                   "address; `ip -br addr` on each)"));
  }
  if (!run.ran) return out;

  // Each pair's connections, both ways.
  std::map<std::pair<size_t, size_t>, std::vector<const PeerConnection*>> failed, tried;
  for (const PeerConnection& c : run.connections) {
    if (c.from >= n || c.to >= n || c.from == c.to) continue;
    const auto pair = std::minmax(c.from, c.to);
    tried[pair].push_back(&c);
    if (Failed(c)) failed[pair].push_back(&c);
  }
  std::vector<size_t> pairs_of(n, 0), failed_of(n, 0);
  size_t ok_pairs = 0;
  double slowest_ms = 0;
  for (const auto& [pair, list] : tried) {
    ++pairs_of[pair.first];
    ++pairs_of[pair.second];
    if (failed.count(pair)) {
      ++failed_of[pair.first];
      ++failed_of[pair.second];
    } else {
      ++ok_pairs;
      for (const PeerConnection* c : list) slowest_ms = std::max(slowest_ms, c->ms);
    }
  }

  // A node every one of whose pairs failed, while some pair connected, is cut off. (Each node has
  // two partners or more: every other node, or in a round of the health watch's plan its
  // neighbours in the ring and more, peer_plan.h.)
  const bool every_pair = run.offsets.empty();
  std::vector<bool> cut_off(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (pairs_of[i] == 0 || failed_of[i] != pairs_of[i] || ok_pairs == 0) continue;
    cut_off[i] = true;
    std::vector<const PeerConnection*> its;
    for (const auto& [pair, list] : failed) {
      if (pair.first == i || pair.second == i) its.insert(its.end(), list.begin(), list.end());
    }
    const std::string addresses = [&] {
      std::vector<std::string> a;
      for (const CollectiveEndpoint& e : run.endpoints[i]) a.push_back(e.address);
      return Join(a);
    }();
    const std::string partners =
        every_pair ? fmt::format("any of the other {} node(s) {}, which connect with each other",
                                 pairs_of[i], over)
                   : fmt::format(
                         "any of the {} node(s) it was tested with {}, which connect "
                         "with others",
                         pairs_of[i], over);
    out.push_back(Make(Severity::kError, "peers", "", {nodes[i].host},
                       fmt::format("node {} ({}) cannot connect with {}: {}; NCCL's and Gloo's "
                                   "init would wait for it until their timeout",
                                   nodes[i].host, addresses, partners, Examples(its, nodes)),
                       kCutOffRemedy));
  }

  // The failing pairs no cut-off node explains.
  std::vector<const PeerConnection*> rest;
  std::set<std::string> rest_nodes;
  size_t rest_pairs = 0;
  for (const auto& [pair, list] : failed) {
    if (cut_off[pair.first] || cut_off[pair.second]) continue;
    ++rest_pairs;
    rest.insert(rest.end(), list.begin(), list.end());
    rest_nodes.insert(nodes[pair.first].host);
    rest_nodes.insert(nodes[pair.second].host);
  }
  if (rest_pairs > 0) {
    out.push_back(Make(
        Severity::kError, "peers", "", {rest_nodes.begin(), rest_nodes.end()},
        fmt::format("{} cannot connect {}: {}; NCCL's and Gloo's init would wait until their "
                    "timeout",
                    rest_pairs == 1
                        ? "the nodes " + Join({rest_nodes.begin(), rest_nodes.end()}, " and ")
                        : fmt::format("{} node pairs", rest_pairs),
                    over, Examples(rest, nodes)),
        "allow TCP between the nodes on every port (NCCL and Gloo listen on ephemeral ports): a "
        "firewall or security group, the route between their subnets (`ip route get ADDRESS` on "
        "each), their switch ports' VLANs"));
  }

  // What could not be tested.
  for (size_t i = 0; i < n; ++i) {
    if (i < run.listen_errors.size() && !run.listen_errors[i].empty()) {
      out.push_back(Make(Severity::kWarning, "peers", "", {nodes[i].host},
                         fmt::format("node {}: connections to it not tested: it could not listen "
                                     "on port {} ({})",
                                     nodes[i].host, run.port, run.listen_errors[i]),
                         "run the doctor again (the port is chosen anew each time)"));
    }
    if (i < run.took_part.size() && run.took_part[i] && i < run.not_tested.size() &&
        !run.not_tested[i].empty()) {
      out.push_back(Make(Severity::kWarning, "peers", "", {nodes[i].host},
                         fmt::format("node {}: its connections to the other nodes not tested: {}",
                                     nodes[i].host, run.not_tested[i]),
                         "install Python 3 on the node (the test listens with it), or set "
                         "python: in the cluster file"));
    }
  }
  std::vector<const PeerConnection*> others;
  for (const PeerConnection& c : run.connections) {
    if (c.result == "no-answer" && c.from < n && c.to < n) others.push_back(&c);
  }
  if (!others.empty()) {
    out.push_back(Make(Severity::kWarning, "peers", "", {},
                       fmt::format("{} connection(s) not tested: something other than the test "
                                   "answered on port {}: {}",
                                   others.size(), run.port, Examples(others, nodes)),
                       "run the doctor again (the port is chosen anew each time)"));
  }
  // Who the ok line speaks for: every node, or those the test ran on (a node the probe did not
  // reach took no part; the reach check names it).
  const size_t tested =
      static_cast<size_t>(std::count(run.took_part.begin(), run.took_part.end(), true));
  const bool some = tested > 0 && tested < n;
  if (out.empty() && ok_pairs > 0 && every_pair) {
    out.push_back(Make(Severity::kOk, "peers", "", {},
                       fmt::format("{} {} ({} pair(s), the slowest connection in {:.1f} ms)",
                                   some ? fmt::format("the {} of {} nodes tested connect to each "
                                                      "other",
                                                      tested, n)
                                        : std::string("every node connects to every other"),
                                   over, ok_pairs, slowest_ms)));
  } else if (out.empty() && ok_pairs > 0) {
    std::vector<std::string> offsets;
    for (size_t d : run.offsets) offsets.push_back(std::to_string(d));
    out.push_back(
        Make(Severity::kOk, "peers", "", {},
             fmt::format("{} connects to the nodes it was tested with {} ({} "
                         "pair(s), the nodes {} apart in the ring; every pair in {} "
                         "run(s) of the test; the slowest connection in {:.1f} ms)",
                         some ? fmt::format("each of the {} of {} nodes tested", tested, n)
                              : std::string("every node"),
                         over, ok_pairs, Join(offsets), run.rounds_to_cover, slowest_ms)));
  }
  return out;
}

}  // namespace dtrain
