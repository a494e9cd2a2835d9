// The rules about InfiniBand and RoCE ports (from sysfs): every port up, the same link rates on
// every node, nvidia_peermem loaded where GPUs and InfiniBand meet (GPUDirect RDMA), and no limit
// on the memory a job may lock (RDMA registers pinned memory).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"

namespace dtrain {

using checks::Join;
using checks::Make;
using checks::Reached;

namespace {

// The distinct rates of a node's ports that are up: "400 Gb/sec (4X NDR)".
std::string Rates(const NodeHealth& h) {
  std::set<std::string> rates;
  for (const InfinibandPort& p : h.ib_ports) {
    if (p.Up() && !p.rate.empty()) rates.insert(p.rate);
  }
  return Join(std::vector<std::string>(rates.begin(), rates.end()));
}

}  // namespace

std::vector<Finding> CheckInfiniband(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  std::map<std::string, int> rate_count;
  for (const NodeFacts* n : Reached(nodes)) {
    const NodeHealth& h = n->health;
    std::vector<std::string> down;
    for (const InfinibandPort& p : h.ib_ports) {
      if (!p.Up()) down.push_back(fmt::format("{} ({}, {})", p.name, p.state, p.phys_state));
    }
    if (!down.empty()) {
      out.push_back(Make(Severity::kError, "infiniband", "", {n->host},
                         fmt::format("node {}: InfiniBand port{} not up: {}", n->host,
                                     down.size() == 1 ? "" : "s", Join(down)),
                         "check the cable and the switch port (ibstat shows the state); a port "
                         "that is not ACTIVE/LinkUp makes NCCL fail or fall back to sockets"));
    }
    const std::string rates = Rates(h);
    if (!rates.empty()) ++rate_count[rates];
    if (h.peermem == "no" && !n->gpus.empty()) {
      out.push_back(Make(Severity::kWarning, "peermem", "", {n->host},
                         fmt::format("node {} has GPUs and InfiniBand but nvidia_peermem is not "
                                     "loaded: NCCL cannot use GPUDirect RDMA through it",
                                     n->host),
                         "sudo modprobe nvidia_peermem (and list it in /etc/modules-load.d); "
                         "with the open kernel module on Linux 5.12+ NCCL can use DMA-BUF "
                         "instead"));
    }
  }
  if (rate_count.size() < 2) return out;
  const auto majority =
      std::max_element(rate_count.begin(), rate_count.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  for (const NodeFacts* n : Reached(nodes)) {
    const std::string rates = Rates(n->health);
    if (rates.empty() || rates == majority->first) continue;
    out.push_back(Make(
        Severity::kWarning, "infiniband-rate", "", {n->host},
        fmt::format("node {} has InfiniBand at {}, others {}", n->host, rates, majority->first),
        "every collective runs at the slowest link's speed: check the cables "
        "and the switch ports' speed"));
  }
  return out;
}

std::vector<Finding> CheckMemlock(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    if (n->health.ib_ports.empty() || n->memlock_kib < 0) continue;
    out.push_back(Make(
        Severity::kWarning, "memlock", "", {n->host},
        fmt::format("node {} has InfiniBand/RoCE ports, and a job there may lock only {} KiB of "
                    "memory (ulimit -l)",
                    n->host, n->memlock_kib),
        "NCCL pins the buffers it registers with the NIC, and past the limit registration fails "
        "(ibv_reg_mr: Cannot allocate memory): make it unlimited for the job's user (`* - memlock "
        "unlimited` in /etc/security/limits.conf, LimitMEMLOCK=infinity for sshd or slurmd "
        "under systemd, --ulimit memlock=-1 for a container)"));
  }
  return out;
}

}  // namespace dtrain
