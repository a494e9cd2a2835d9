// What a Horovod program needs, beyond the rank variables, to start its Gloo controller without
// horovodrun (horovod/runner/gloo_run.py, create_run_env_vars): where the rendezvous server is,
// the controller and CPU operations, and the network interface Gloo binds on each node.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/rank_plan.h"

namespace dtrain {

struct HorovodGlooNetwork {
  std::string bind_address;  // where the rendezvous server listens
  // Per node (NodeSpec::host): this machine as that node reaches it.
  std::map<std::string, std::string> rendezvous_addr;
  // Per node: the interface that reaches the other nodes; "" unknown.
  std::map<std::string, std::string> iface;
  // Per SSH node whose interface was not looked up here: the other node the rank's own start
  // routes towards to find it (kGlooIfaceTowards).
  std::map<std::string, std::string> iface_towards;
  std::vector<std::string> notes;  // what could not be found, for the console
};

// Local transport: loopback everywhere. Otherwise this machine's source address towards each
// node, and on each SSH node (through the transport) `ip -o route get` towards another node
// (the first node; the second for the first node). Slurm nodes are not asked (a job step of its
// own); their interface stays unset unless the cluster file sets it.
// `ask_nodes` false (a job that did not ask for Horovod, served in case it is one): no query
// before the launch; each SSH node's ranks find their interface as they start, through
// `iface_towards` (the same `ip -o route get` towards the same node, run by the rank's own
// remote command: no extra connection, no round trip).
// Nodes in `not_asked` (not reached, or not yet listed by a discovery script) are treated as
// with `ask_nodes` false.
HorovodGlooNetwork FindHorovodGlooNetwork(const ClusterSpec& spec, bool ask_nodes = true,
                                          const std::set<std::string>& not_asked = {});

// The variable that carries iface_towards to an SSH rank's remote command, which sets
// HOROVOD_GLOO_IFACE from `ip -o route get` towards it (unless set) and then drops it: the
// program never sees it. Without iproute2 on the node, HOROVOD_GLOO_IFACE stays unset.
inline constexpr const char* kGlooIfaceTowards = "DTRAIN_GLOO_IFACE_TOWARDS";

// Adds HOROVOD_GLOO_RENDEZVOUS_ADDR/PORT, HOROVOD_CONTROLLER=gloo, HOROVOD_CPU_OPERATIONS=gloo,
// HOROVOD_GLOO_IFACE (or kGlooIfaceTowards, where the interface is found on the node) and (with
// `nccl_iface`, a job that asked for Horovod) NCCL_SOCKET_IFNAME to every rank, except where the
// cluster file or -x already set the variable.
void AddHorovodGlooEnv(RankPlan& plan, const HorovodGlooNetwork& network, int port,
                       bool nccl_iface = true);

// The command asks for Horovod itself: one of its arguments is exactly `--horovod` (OpenCLIP's
// switch, and that of most trainers with a Horovod mode). Nothing else is guessed.
bool CommandAsksForHorovod(const std::vector<std::string>& command);

// "dev eth0" out of `ip -o route get` output; "" when there is none.
std::string RouteInterface(const std::string& ip_route_output);

}  // namespace dtrain
