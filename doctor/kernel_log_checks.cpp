// The rule about a node's kernel log of this boot: Xid errors of its GPUs and SXid errors of its
// NVSwitches, named with the GPU they concern and what they mean (doctor/xid_events.h).
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"

namespace dtrain {

using checks::Make;
using checks::Reached;
using checks::Times;

namespace {

bool GpuNode(const NodeFacts& n) {
  return !n.gpus.empty() || n.driver.known() || n.health.smi_reported || n.health.smi_timeout_s > 0;
}

// "GPU 0 (PCI 0000:00:06)", or the address alone when nvidia-smi no longer lists a GPU there.
std::string GpuAt(const NodeHealth& h, const std::string& device) {
  const GpuHealth* gpu = h.GpuAt(device);
  if (gpu) return fmt::format("GPU {} (PCI {})", gpu->index, device);
  return fmt::format("the GPU at PCI {}{}", device,
                     h.smi_reported ? ", which nvidia-smi no longer lists" : "");
}

Finding XidFinding(const NodeFacts& n, const XidEvent& e, int count) {
  const XidClass cls = ClassifyXid(e.code);
  std::string meaning = XidMeaning(e.code);
  if (meaning.empty()) meaning = e.text.empty() ? "see NVIDIA's Xid catalog" : e.text;
  const std::string message = fmt::format("node {}: Xid {} on {}, {} this boot: {}", n.host, e.code,
                                          GpuAt(n.health, e.device), Times(count), meaning);
  const GpuHealth* gpu = n.health.GpuAt(e.device);
  const std::string reset = gpu ? fmt::format("nvidia-smi -r -i {}", gpu->index) : "nvidia-smi -r";
  switch (cls) {
    case XidClass::kFatal:
      return Make(Severity::kError, "xid", "gpus", {n.host}, message,
                  e.code == 79 ? std::string("reboot the node; if the GPU falls off again, reseat "
                                             "or replace it (check its power cables and slot)")
                               : fmt::format("drain the node: reset the GPU ({}) or reboot, and "
                                             "run `dcgmi diag -r 3` before trusting it again",
                                             reset));
    case XidClass::kApplication:
      return Make(Severity::kWarning, "xid", "gpus", {n.host}, message,
                  "usually the application's (a bad kernel, an illegal address, a killed "
                  "process); if it repeats across jobs on this GPU alone, test the GPU with "
                  "`dcgmi diag -r 3`");
    case XidClass::kOther:
      break;
  }
  return Make(Severity::kWarning, "xid", "gpus", {n.host}, message,
              fmt::format("look Xid {} up in NVIDIA's Xid catalog "
                          "(docs.nvidia.com/deploy/xid-errors) for what to do",
                          e.code));
}

Finding SxidFinding(const NodeFacts& n, const XidEvent& e, int count) {
  const std::string message =
      fmt::format("node {}: SXid {} ({}) on the NVSwitch at PCI {}, {} this boot: {}", n.host,
                  e.code, e.fatal ? "fatal" : "non-fatal", e.device, Times(count), e.text);
  if (e.fatal) {
    return Make(Severity::kError, "sxid", "gpus", {n.host}, message,
                "reboot the node (a fatal SXid needs the GPUs and NVSwitches reset; see NVIDIA's "
                "Fabric Manager user guide); have the baseboard serviced if it recurs");
  }
  return Make(Severity::kWarning, "sxid", "gpus", {n.host}, message,
              "non-fatal: watch whether it grows (NVIDIA's Fabric Manager user guide lists the "
              "SXids)");
}

}  // namespace

std::vector<Finding> CheckKernelLog(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    const NodeHealth& h = n->health;
    if (!h.kernel_log_error.empty() && GpuNode(*n)) {
      out.push_back(Make(Severity::kWarning, "kernel-log", "", {n->host},
                         fmt::format("node {}: the kernel log cannot be read ({}), so its Xid "
                                     "errors were not checked",
                                     n->host, h.kernel_log_error),
                         "run the doctor as a user who may read it (root, or a member of "
                         "systemd-journal or adm), or set kernel.dmesg_restrict=0"));
    }
    // One finding per GPU (or NVSwitch) and code, with how often it occurred, in log order.
    std::vector<std::tuple<bool, std::string, int>> order;
    std::map<std::tuple<bool, std::string, int>, std::pair<const XidEvent*, int>> seen;
    for (const XidEvent& e : h.xids) {
      const auto key = std::make_tuple(e.switch_xid, e.device, e.code);
      auto [it, fresh] = seen.emplace(key, std::make_pair(&e, 0));
      if (fresh) order.push_back(key);
      ++it->second.second;
      if (e.fatal) it->second.first = &e;  // an SXid code's fatal line wins
    }
    for (const auto& key : order) {
      const auto& [event, count] = seen[key];
      out.push_back(event->switch_xid ? SxidFinding(*n, *event, count)
                                      : XidFinding(*n, *event, count));
    }
  }
  return out;
}

}  // namespace dtrain
