// The interface query is one short process per node through the job's own transport, so it
// reaches nodes exactly as the ranks will (SSH, srun) and needs only iproute2 there.
#include "launcher/horovod_gloo.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "launcher/transport.h"

namespace dtrain {
namespace {

constexpr int kQueryTimeoutMs = 30000;

// The address this machine sends from towards `host` (a UDP connect sends nothing).
std::string SourceAddressTowards(const std::string& host, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    *why = fmt::format("cannot resolve {}: {}", host, ::gai_strerror(rc));
    return "";
  }
  std::string out;
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in self{};
    socklen_t len = sizeof(self);
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0 &&
        ::inet_ntop(AF_INET, &self.sin_addr, text, sizeof(text))) {
      out = text;
    }
  }
  if (out.empty()) *why = fmt::format("no route from here to {}: {}", host, std::strerror(errno));
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return out;
}

struct CollectOutput : TransportEvents {
  std::map<int, std::string> out;
  std::map<int, ExitStatus> status;
  void OnOutput(int id, OutputStream stream, std::string_view bytes) override {
    if (stream == OutputStream::kStdout) out[id].append(bytes);
  }
  void OnExit(int id, const ExitStatus& s) override { status[id] = s; }
};

}  // namespace

std::string RouteInterface(const std::string& ip_route_output) {
  std::istringstream words(ip_route_output);
  for (std::string word; words >> word;) {
    if (word == "dev" && words >> word) return word;
  }
  return "";
}

HorovodGlooNetwork FindHorovodGlooNetwork(const ClusterSpec& spec, bool ask_nodes,
                                          const std::set<std::string>& not_asked) {
  HorovodGlooNetwork net;
  const size_t n = spec.nodes.size();
  if (spec.transport == TransportKind::kLocal) {
    net.bind_address = "127.0.0.1";
    for (const NodeSpec& node : spec.nodes) {
      net.rendezvous_addr[node.host] = "127.0.0.1";
      net.iface[node.host] = "lo";
    }
    return net;
  }
  net.bind_address = "0.0.0.0";
  for (const NodeSpec& node : spec.nodes) {
    std::string why;
    std::string addr = SourceAddressTowards(node.address, &why);
    if (addr.empty()) {
      net.notes.push_back(fmt::format("Horovod rendezvous: node {}: {}; ranks there get {}",
                                      node.host, why, spec.nodes.front().address));
      addr = spec.nodes.front().address;
    }
    net.rendezvous_addr[node.host] = addr;
  }
  // Towards which node each node's interface is looked up: the first; the second for the first.
  auto peer = [&](size_t i) -> const NodeSpec& { return spec.nodes[i == 0 && n > 1 ? 1 : 0]; };
  std::vector<size_t> asked;
  for (size_t i = 0; i < n; ++i) {
    const NodeSpec& node = spec.nodes[i];
    net.iface[node.host] = "";
    if (ask_nodes && !not_asked.count(node.host)) {
      asked.push_back(i);
    } else if (spec.transport == TransportKind::kSsh) {
      net.iface_towards[node.host] = peer(i).address;
    }
  }
  if (asked.empty()) return net;
  if (spec.transport == TransportKind::kSlurm) {
    // Asking would cost a job step (outside an allocation, a batch job in the queue) before the
    // job itself; Gloo falls back to the address of each node's hostname, which Slurm resolves.
    net.notes.push_back(
        "Horovod on Slurm: HOROVOD_GLOO_IFACE is not looked up (set it in env: if the nodes' "
        "hostnames do not resolve to the interface that reaches the other nodes)");
    return net;
  }
  std::vector<ProcessSpec> queries;
  for (size_t i : asked) {
    ProcessSpec q;
    q.id = static_cast<int>(i);
    q.node_index = static_cast<int>(i);
    q.argv = {"ip", "-o", "route", "get", peer(i).address};
    q.own_step = true;
    queries.push_back(std::move(q));
  }
  CollectOutput events;
  std::unique_ptr<Transport> transport = MakeTransport(spec);
  transport->Start(queries, events);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kQueryTimeoutMs);
  bool killed = false;
  while (transport->Poll(200, events)) {  // after a kill, until the transport reaped them
    if (!killed && std::chrono::steady_clock::now() > until) {
      transport->SignalAll(SIGKILL);
      killed = true;
    }
  }
  for (size_t i : asked) {
    const std::string iface = RouteInterface(events.out[static_cast<int>(i)]);
    if (iface.empty()) {
      const ExitStatus& s = events.status[static_cast<int>(i)];
      net.notes.push_back(
          fmt::format("Horovod: no network interface found on node {} (`ip -o route get` {}); "
                      "HOROVOD_GLOO_IFACE left unset there (set it in the node's env)",
                      spec.nodes[i].host, s.ok() ? "printed no `dev`" : s.Describe()));
    }
    net.iface[spec.nodes[i].host] = iface;
  }
  return net;
}

void AddHorovodGlooEnv(RankPlan& plan, const HorovodGlooNetwork& network, int port,
                       bool nccl_iface) {
  for (RankSlot& slot : plan.ranks) {
    auto& env = slot.env;
    auto addr = network.rendezvous_addr.find(slot.host);
    if (addr != network.rendezvous_addr.end())
      env.emplace("HOROVOD_GLOO_RENDEZVOUS_ADDR", addr->second);
    env.emplace("HOROVOD_GLOO_RENDEZVOUS_PORT", std::to_string(port));
    env.emplace("HOROVOD_CONTROLLER", "gloo");
    env.emplace("HOROVOD_CPU_OPERATIONS", "gloo");
    auto iface = network.iface.find(slot.host);
    auto towards = network.iface_towards.find(slot.host);
    if (iface != network.iface.end() && !iface->second.empty()) {
      env.emplace("HOROVOD_GLOO_IFACE", iface->second);
      if (nccl_iface) env.emplace("NCCL_SOCKET_IFNAME", iface->second);
    } else if (towards != network.iface_towards.end() && !env.count("HOROVOD_GLOO_IFACE")) {
      env.emplace(kGlooIfaceTowards, towards->second);
    }
  }
}
bool CommandAsksForHorovod(const std::vector<std::string>& command) {
  for (const std::string& arg : command) {
    if (arg == "--horovod") return true;
  }
  return false;
}

}  // namespace dtrain
