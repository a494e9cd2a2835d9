// How NCCL and Gloo pick a node's interfaces (interface_match.h).
#include "doctor/interface_match.h"

#include <algorithm>

namespace dtrain {

NcclList ParseNcclList(std::string value) {
  NcclList list;
  if (!value.empty() && value[0] == '^') {
    list.exclude = true;
    value.erase(0, 1);
  }
  if (!value.empty() && value[0] == '=') {
    list.exact = true;
    value.erase(0, 1);
  }
  size_t start = 0;
  while (start <= value.size()) {
    const size_t comma = std::min(value.find(',', start), value.size());
    const std::string item = value.substr(start, comma - start);
    if (!item.empty()) {
      const size_t colon = item.find(':');
      list.items.push_back(item.substr(0, colon));
      list.ports.push_back(colon == std::string::npos ? "" : item.substr(colon + 1));
    }
    start = comma + 1;
  }
  return list;
}

bool NcclKeeps(const NcclList& list, const std::string& name, const std::string& port) {
  bool matched = list.items.empty();
  for (size_t i = 0; i < list.items.size() && !matched; ++i) {
    const bool name_matches =
        list.exact ? name == list.items[i] : name.rfind(list.items[i], 0) == 0;
    matched = name_matches && (list.ports[i].empty() || port.empty() || list.ports[i] == port);
  }
  return matched != list.exclude;
}

bool UsableAddress(const std::string& cidr, const std::string& family) {
  const bool v6 = cidr.find(':') != std::string::npos;
  if (v6 && cidr.rfind("::1/", 0) == 0) return false;
  if (family == "AF_INET") return !v6;
  if (family == "AF_INET6") return v6;
  return true;
}

bool HasAddress(const NetworkInterface& i, const std::string& family) {
  if (!i.addresses_known) return true;
  for (const std::string& a : i.addresses) {
    if (UsableAddress(a, family)) return true;
  }
  return false;
}

bool LinkDown(const NetworkInterface& i) {
  return i.state == "down" || i.state == "lowerlayerdown" || i.state == "notpresent";
}

std::string InterfaceEnv(const NodeFacts& n, const std::string& name) {
  auto it = n.health.interface_env.find(name);
  return it == n.health.interface_env.end() ? std::string() : it->second;
}

namespace {

// The first address of `i` the library would connect to, without its prefix length; "" if none.
std::string FirstAddress(const NetworkInterface& i, const std::string& family) {
  for (const std::string& cidr : i.addresses) {
    if (!UsableAddress(cidr, family)) continue;
    if (cidr.rfind("fe80:", 0) == 0) continue;  // link-local: unreachable without a scope
    return cidr.substr(0, cidr.find('/'));
  }
  return "";
}

void Add(const NetworkInterface& i, const std::string& family,
         std::vector<CollectiveEndpoint>& out) {
  if (!i.addresses_known) return;
  const std::string address = FirstAddress(i, family);
  if (address.empty()) return;
  for (const CollectiveEndpoint& e : out) {
    if (e.address == address) return;
  }
  out.push_back({i.name, address, !LinkDown(i)});
}

}  // namespace

std::vector<std::string> NcclOwnPick(const NodeFacts& n) {
  const std::string family = InterfaceEnv(n, "NCCL_SOCKET_FAMILY");
  for (const char* step : {"ib", "^docker,lo,virbr", "docker", "lo", "virbr"}) {
    const NcclList list = ParseNcclList(step);
    std::vector<std::string> picked;
    for (const NetworkInterface& i : n.health.interfaces) {
      if (HasAddress(i, family) && NcclKeeps(list, i.name)) picked.push_back(i.name);
    }
    if (!picked.empty()) return picked;
  }
  return {};
}

std::vector<CollectiveEndpoint> CollectiveEndpoints(const NodeFacts& n,
                                                    std::vector<std::string>* variables) {
  std::vector<CollectiveEndpoint> out;
  bool any = false;
  const std::string nccl = InterfaceEnv(n, "NCCL_SOCKET_IFNAME");
  const std::string family = InterfaceEnv(n, "NCCL_SOCKET_FAMILY");
  if (nccl.size() > 1) {  // NCCL reads a value of one character as unset
    any = true;
    if (variables) variables->push_back("NCCL_SOCKET_IFNAME");
    const NcclList list = ParseNcclList(nccl);
    for (const NetworkInterface& i : n.health.interfaces) {
      if (NcclKeeps(list, i.name)) Add(i, family, out);
    }
  } else if (!n.gpus.empty() && n.health.interfaces_read) {
    // A GPU node's job runs NCCL, which picks interfaces of its own when told none.
    any = true;
    if (variables) variables->push_back(kNcclOwnPick);
    for (const std::string& name : NcclOwnPick(n)) {
      for (const NetworkInterface& i : n.health.interfaces) {
        if (i.name == name) Add(i, family, out);
      }
    }
  }
  for (const char* variable : {"GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE"}) {
    const std::string value = InterfaceEnv(n, variable);
    if (value.empty()) continue;
    any = true;
    if (variables) variables->push_back(variable);
    for (const std::string& name : ParseNcclList(value).items) {  // Gloo: exact names, commas
      for (const NetworkInterface& i : n.health.interfaces) {
        if (i.name == name) Add(i, "", out);
      }
    }
  }
  if (!any && !n.address.empty()) out.push_back({"", n.address});
  return out;
}

}  // namespace dtrain
