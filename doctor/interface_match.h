// How NCCL and Gloo pick a node's network interfaces from the job's variables, read from NCCL's
// findInterfaces and checked against torch's Gloo: shared by the interface rule
// (interface_checks.cpp), which says whether what they name is there and up, and the peer
// connection test (peer_run.h), which connects every node to every other over what they pick.
#pragma once

#include <string>
#include <vector>

#include "doctor/node_facts.h"

namespace dtrain {

// NCCL's list syntax (NCCL_SOCKET_IFNAME, NCCL_IB_HCA): "^" first excludes what the list matches,
// then "=" matches names exactly instead of as prefixes; items "name[:port]", comma-separated.
struct NcclList {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> items;  // without their ":port"
  std::vector<std::string> ports;  // "" where an item names none
};
NcclList ParseNcclList(std::string value);

// Whether NCCL keeps `name` (and, for an InfiniBand port, `port`) under `list`.
bool NcclKeeps(const NcclList& list, const std::string& name, const std::string& port = "");

// Whether NCCL can use the address `cidr` ("10.0.0.5/24"): IPv4 and IPv6 (only one of them under
// NCCL_SOCKET_FAMILY `family`), not IPv6's loopback.
bool UsableAddress(const std::string& cidr, const std::string& family = "");

// Whether the interface has an address NCCL can use; true where its addresses are unknown (no
// `ip` on the node: not judged).
bool HasAddress(const NetworkInterface& i, const std::string& family = "");

// "down", "lowerlayerdown", "notpresent": the link is not up ("unknown" is how some virtual
// devices that are up report themselves).
bool LinkDown(const NetworkInterface& i);

// The value of the job's variable `name` on the node as its probe saw it ("" when unset).
std::string InterfaceEnv(const NodeFacts& n, const std::string& name);

// What NCCL picks on the node with NCCL_SOCKET_IFNAME unset, as NCCL 2.2x does: the interfaces
// named ib* with an address (IPoIB); else every one but docker*, lo* and virbr*; else docker*,
// then lo*, then virbr*. Link state is not looked at (NCCL does not).
std::vector<std::string> NcclOwnPick(const NodeFacts& n);

// The name CollectiveEndpoints gives NCCL's own pick among the variables.
constexpr const char* kNcclOwnPick = "NCCL_SOCKET_IFNAME unset: NCCL's own pick";

// One address a node's collectives listen on and the others connect to.
struct CollectiveEndpoint {
  std::string interface;  // "" for the node's address in the cluster file
  std::string address;    // without its prefix length
  bool link_up = true;    // false: picked, but its link is down (the interface rule's concern)
};

// What NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and HOROVOD_GLOO_IFACE pick on the node: each
// picked interface (link_up saying whether its link is up), with its first address the library
// would use (an IPv6
// link-local one is left out: it needs the interface's scope to be reached). On a node with GPUs
// and NCCL_SOCKET_IFNAME unset, NCCL's own pick (NcclOwnPick; `variables` gets kNcclOwnPick).
// Set to none of them on a node without GPUs, the node's address in the cluster file (what
// MASTER_ADDR and the rendezvous use). Empty when
// the variables pick nothing usable (the interface rule says why) or the node's addresses are
// unknown. `variables` (optional) gets the names of the variables that were set.
std::vector<CollectiveEndpoint> CollectiveEndpoints(const NodeFacts& n,
                                                    std::vector<std::string>* variables = nullptr);

}  // namespace dtrain
