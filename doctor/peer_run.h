// The peer connection test: every node connects to every other at the addresses the job's
// collectives use there (interface_match.h: what NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and
// HOROVOD_GLOO_IFACE pick, else the node's address in the cluster file), as Gloo's full mesh and
// NCCL's rings do at init. Run after the probe, whose facts say what each node picks: one process
// per node (templates/probe.sh, DTRAIN_PROBE_MODE=peers) listens there on one port and connects to
// all the others at once. A node whose interface is up but reaches nobody (a switch port in the
// wrong VLAN, a firewall, an address on the wrong subnet, two nodes with one address) stops
// NCCL's bootstrap or Gloo's connectFullMesh until their timeout; this names it in seconds.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "doctor/interface_match.h"
#include "doctor/node_facts.h"
#include "doctor/peer_plan.h"
#include "launcher/cluster_spec.h"

namespace dtrain {

// One connection attempt of the test, from node `from` to node `to`'s `address`.
struct PeerConnection {
  size_t from = 0, to = 0;  // indices in the nodes
  std::string address;
  // "ok", "refused", "unreachable", "timeout", "wrong-node" (another node answered: `detail`
  // holds its index), "no-answer" (something else holds the port); "" when `from` said nothing
  // of it (its process failed).
  std::string result;
  double ms = 0;       // the attempt that connected, to the answer; failed: how long it was tried
  std::string detail;  // the system's words for a failure
};

struct PeerRun {
  bool ran = false;  // two nodes or more took part
  int port = 0;
  double wait_s = 0;                   // how long a connection was retried
  std::vector<std::string> variables;  // the job's variables that picked the addresses
  // Per node (in the nodes' order): the addresses the job's collectives use there (those whose
  // link is up and that no other node has are the ones tested), and why it took no part, or its
  // part failed ("" when neither).
  std::vector<std::vector<CollectiveEndpoint>> endpoints;
  std::vector<std::string> not_tested;
  std::vector<bool> took_part;             // per node: it listened and connected (or was to)
  std::vector<std::string> listen_errors;  // per node: "ADDRESS: why" of a listen that failed
  std::vector<PeerConnection> connections;
  double wall_s = 0;
  // The ring offsets the nodes connected at (peer_plan.h); empty: every node to every other.
  std::vector<size_t> offsets;
  size_t rounds_to_cover = 1;  // rounds of the plan that test every pair
};

struct PeerOptions {
  double wait_s = 5;  // how long each connection is retried while refused or unreachable
  // Asked between polls; true stops the test at once (what came back is kept).
  std::function<bool()> cancelled;
  bool beside_ranks = false;  // Slurm: the test's step overlaps the ranks' (ProcessSpec)
  PeerPlan plan;              // who connects to whom; by default every node to every other
};

// Runs the test over the nodes the probe reached (`nodes`: the probe's facts, in the cluster's
// order) through the cluster's transport, the pairs of `options.plan` among the nodes that take
// part; of nodes the cluster file gives one address, the first takes part for all. Fewer than two
// nodes with addresses, or DTRAIN_PROBE_SKIP in the cluster file's env naming "peers": nothing is
// run (ran = false). A port already in use on a node is tried once more with another. Throws
// dtrain::Error only when the transport cannot be built.
PeerRun RunPeerConnections(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes,
                           const PeerOptions& options = {});

// What the test's processes printed, by node: fills `run.connections` and `run.listen_errors`
// (and `run.not_tested` for a node whose process failed, `exit` saying how it ended, "" when it
// said it was done). Exposed for the tests.
void ApplyPeerOutput(size_t node, const std::string& output, const std::string& exit, PeerRun& run);

// `dtrain doctor --json`'s document with a "peer_connections" member: the port, the variables,
// each node's addresses, how many connections were made and the slowest, and every connection
// that failed, by node name.
std::string AddPeerConnectionsJson(const std::string& report_json, const PeerRun& run,
                                   const std::vector<NodeFacts>& nodes);

}  // namespace dtrain
