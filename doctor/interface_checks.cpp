// The rule about the network interfaces the job's variables name: NCCL_SOCKET_IFNAME (NCCL's
// bootstrap and socket transport), GLOO_SOCKET_IFNAME and HOROVOD_GLOO_IFACE (Gloo), matched on
// each node against its own interfaces as NCCL and Gloo match them, and NCCL_IB_HCA against its
// InfiniBand ports. A node where the interface is missing or down fails at the collectives' init
// or hangs in them; the doctor names it before the job starts.
#include <set>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"
#include "doctor/interface_match.h"

namespace dtrain {

using checks::AllOrSomeOf;
using checks::Join;
using checks::Make;
using checks::Reached;

namespace {

// The node's interfaces with an address, for messages: "eth0, lo".
std::string WithAddresses(const NodeFacts& n, const std::string& family = "") {
  std::vector<std::string> names;
  for (const NetworkInterface& i : n.health.interfaces) {
    if (HasAddress(i, family)) names.push_back(i.name);
  }
  return names.empty() ? std::string("none") : Join(names);
}

constexpr const char* kInterfaceRemedy =
    "set it (env: in the cluster file, or the node's own env:) to interfaces every node has up "
    "with an address, or leave it unset for NCCL and Gloo to choose; a node whose link did not "
    "come up needs its cable, switch port or driver looked at (dtrain doctor --exclude-bad "
    "leaves it out)";

void CheckNccl(const NodeFacts& n, std::vector<Finding>& out) {
  const std::string value = InterfaceEnv(n, "NCCL_SOCKET_IFNAME");
  if (value.size() <= 1) return;  // NCCL reads one of a single character as unset
  const std::string family = InterfaceEnv(n, "NCCL_SOCKET_FAMILY");
  const NcclList list = ParseNcclList(value);
  std::vector<std::string> picked, down;
  for (const NetworkInterface& i : n.health.interfaces) {
    if (!HasAddress(i, family) || !NcclKeeps(list, i.name)) continue;
    picked.push_back(i.name);
    if (LinkDown(i)) down.push_back(i.name);
  }
  if (picked.empty()) {
    out.push_back(Make(Severity::kError, "interface", "", {n.host},
                       fmt::format("node {}: NCCL_SOCKET_IFNAME={} matches none of its interfaces "
                                   "with an address ({}): NCCL stops at init (\"Bootstrap : no "
                                   "socket interface found\")",
                                   n.host, value, WithAddresses(n, family)),
                       kInterfaceRemedy));
  } else if (!down.empty()) {
    out.push_back(Make(Severity::kError, "interface", "", {n.host},
                       fmt::format("node {}: NCCL_SOCKET_IFNAME={} picks {}, whose link is down: "
                                   "NCCL's connections over it fail or hang",
                                   n.host, value, Join(down)),
                       kInterfaceRemedy));
  }
}

void CheckGloo(const NodeFacts& n, const char* variable, std::vector<Finding>& out) {
  const std::string value = InterfaceEnv(n, variable);
  if (value.empty()) return;
  std::vector<std::string> missing, down;
  for (const std::string& name : ParseNcclList(value).items) {  // Gloo: exact names, commas
    const NetworkInterface* found = nullptr;
    for (const NetworkInterface& i : n.health.interfaces) {
      if (i.name == name && HasAddress(i)) found = &i;
    }
    if (!found) missing.push_back(name);
    if (found && LinkDown(*found)) down.push_back(name);
  }
  if (!missing.empty()) {
    out.push_back(
        Make(Severity::kError, "interface", "", {n.host},
             fmt::format("node {}: {}={}: it has no interface {} with an address (it "
                         "has {}): Gloo stops at init (\"Unable to find address for: "
                         "{}\")",
                         n.host, variable, value, Join(missing), WithAddresses(n), missing.front()),
             kInterfaceRemedy));
  } else if (!down.empty()) {
    out.push_back(Make(Severity::kError, "interface", "", {n.host},
                       fmt::format("node {}: {}={}: the link of {} is down: Gloo's connections "
                                   "over it fail or hang",
                                   n.host, variable, value, Join(down)),
                       kInterfaceRemedy));
  }
}

// NCCL_IB_HCA against the node's InfiniBand ports ("mlx5_0/1"): none kept means NCCL finds no IB
// device and runs every collective over TCP sockets.
void CheckIbHca(const NodeFacts& n, std::vector<Finding>& out) {
  const std::string value = InterfaceEnv(n, "NCCL_IB_HCA");
  if (value.empty() || n.health.ib_ports.empty()) return;
  const NcclList list = ParseNcclList(value);
  std::vector<std::string> ports;
  for (const InfinibandPort& p : n.health.ib_ports) {
    const size_t slash = p.name.find('/');
    const std::string device = p.name.substr(0, slash);
    const std::string port = slash == std::string::npos ? "" : p.name.substr(slash + 1);
    if (NcclKeeps(list, device, port)) return;
    ports.push_back(p.name);
  }
  out.push_back(Make(Severity::kWarning, "interface", "", {n.host},
                     fmt::format("node {}: NCCL_IB_HCA={} matches none of its InfiniBand ports "
                                 "({}): NCCL finds no InfiniBand device there and runs every "
                                 "collective over TCP sockets",
                                 n.host, value, Join(ports)),
                     "name the node's HCAs (ibv_devices lists them), or leave NCCL_IB_HCA unset"));
}

}  // namespace

std::vector<Finding> CheckInterfaces(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  size_t judged = 0;
  std::set<std::string> set;  // the variables some node sets
  for (const NodeFacts* n : Reached(nodes)) {
    if (!n->health.interfaces_read) continue;
    ++judged;
    for (const auto& [name, value] : n->health.interface_env) {
      if (name != "NCCL_SOCKET_FAMILY" && !value.empty()) set.insert(name);
    }
    CheckNccl(*n, out);
    CheckGloo(*n, "GLOO_SOCKET_IFNAME", out);
    CheckGloo(*n, "HOROVOD_GLOO_IFACE", out);
    CheckIbHca(*n, out);
  }
  // Said when it holds, as the other checks say theirs.
  if (out.empty() && !set.empty()) {
    out.push_back(Make(Severity::kOk, "interface", "", {},
                       fmt::format("{}: checked on {} node(s), nothing missing or down",
                                   Join(std::vector<std::string>(set.begin(), set.end())),
                                   AllOrSomeOf(judged, nodes.size()))));
  }
  return out;
}

}  // namespace dtrain
