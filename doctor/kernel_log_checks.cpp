// The rule about a node's kernel log of this boot: Xid errors of its GPUs and SXid errors of its
// NVSwitches, named with the GPU they concern and what they mean (doctor/xid_events.h), and the
// host's hardware errors (doctor/host_error_events.h).
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

// What a host error is, said of its count ("3 uncorrected memory errors"), and what to do. Errors:
// an uncorrected memory error (a module failed: the next may hit the job's memory or the kernel's)
// and a fatal PCIe error (a device or its link failed, and stays unreliable until a reboot); the
// others are warnings, which a node runs jobs with.
struct HostErrorRule {
  Severity severity;
  const char* what;  // "{count} {what}"; "{subject}" is replaced by the event's subject
  const char* remedy;
};

HostErrorRule RuleFor(HostErrorKind kind) {
  using K = HostErrorKind;
  switch (kind) {
    case K::kMemoryUncorrected:
      return {Severity::kError, "uncorrected memory error(s) ({subject})",
              "a memory module failed: the kernel took the pages out or killed what used them, "
              "and the next error may hit a rank or the kernel. Drain the node and have the module "
              "replaced (ras-mc-ctl --errors, edac-util -v, the BMC's event log: ipmitool sel "
              "elist)"};
    case K::kMemoryCorrected:
      return {Severity::kWarning, "corrected memory error(s) ({subject})",
              "a memory module may be wearing out: watch whether the count grows (ras-mc-ctl "
              "--error-count), and have it replaced before an error is one ECC cannot correct"};
    case K::kMachineCheck:
      return {Severity::kWarning, "machine check event line(s)",
              "the CPU, a cache, memory or a bus reported hardware errors: read them with "
              "rasdaemon (ras-mc-ctl --errors) or mcelog, and in the BMC's event log (ipmitool "
              "sel elist)"};
    case K::kPcieFatal:
      return {Severity::kError, "fatal uncorrected PCIe error(s) on {subject}",
              "the device or its link failed, and stays unreliable until the node reboots: "
              "lspci -vv -s {subject} shows its AER status; reseat or replace the device (or its "
              "riser, cable or slot) before trusting it again"};
    case K::kPcieNonFatal:
      return {Severity::kWarning, "uncorrected (non-fatal) PCIe error(s) on {subject}",
              "the device lost transactions its driver recovered from; if they repeat, reseat or "
              "replace it or its riser (lspci -vv -s {subject})"};
    case K::kPcieCorrected:
      return {Severity::kWarning, "corrected PCIe error(s) on {subject}",
              "a marginal link (a riser, a cable, a slot) retries: watch whether they grow; a "
              "GPU's or NIC's link that retries slows the job's collectives"};
    case K::kDriveIo:
      return {Severity::kWarning, "I/O error(s) on drive {subject}",
              "the drive failed reads or writes: check it (smartctl -a /dev/{subject}, nvme "
              "smart-log), and keep the job's files (workdir, log_dir, checkpoints) off it until "
              "then"};
    case K::kNvme:
      return {Severity::kWarning, "NVMe command timeout(s) or controller reset(s) on {subject}",
              "the drive stopped answering for a while: a rank writing there stalls every other "
              "rank. Check its health and firmware (nvme smart-log /dev/{subject}, nvme "
              "error-log)"};
    case K::kFileSystem:
      return {Severity::kWarning, "file system error line(s) on {subject}",
              "the kernel found the file system on {subject} broken, and may have made it "
              "read-only or shut it down: repair it unmounted (fsck, xfs_repair) and check its "
              "drive"};
    case K::kHungTask:
      return {Severity::kWarning, "task(s) blocked in the kernel past the hung-task limit",
              "a drive, a network file system or a driver stopped answering: dmesg shows each "
              "blocked task's stack; a rank blocked so stalls every other rank"};
    case K::kLockup:
      return {Severity::kWarning, "CPU lockup or RCU stall line(s)",
              "a CPU stopped scheduling for tens of seconds (a driver, firmware or hardware "
              "fault): a rank on it stalls its job; see dmesg for the stack"};
    case K::kThermal:
      return {Severity::kWarning, "CPU thermal throttling line(s)",
              "the CPU slowed itself down for heat: check the node's cooling (fans, airflow, "
              "ipmitool sensor); a throttled CPU makes its ranks stragglers"};
  }
  return {Severity::kWarning, "", ""};
}

// The rule's text for `subject`; without one, the words that would name it are left out.
std::string WithSubject(std::string text, const std::string& subject) {
  if (subject.empty()) {
    for (const std::string words : {" ({subject})", " on {subject}"}) {
      for (size_t at = text.find(words); at != std::string::npos; at = text.find(words))
        text.erase(at, words.size());
    }
  }
  for (size_t at = text.find("{subject}"); at != std::string::npos;
       at = text.find("{subject}", at + subject.size())) {
    text.replace(at, 9, subject);
  }
  return text;
}

// "node gpu-a: 2 uncorrected memory error(s) (EDAC MC0, DIMM_A1) this boot: EDAC MC0: 1 UE ...".
// The message stays the same while the count does: the health watch takes a changed error as new.
Finding HostErrorFinding(const NodeFacts& n, const HostErrorEvent& e) {
  const HostErrorRule rule = RuleFor(e.kind);
  const std::string message = fmt::format("node {}: {} {} this boot: {}", n.host, e.count,
                                          WithSubject(rule.what, e.subject), e.line);
  return Make(rule.severity, "host-errors", "", {n.host}, message,
              WithSubject(rule.remedy, e.subject));
}

}  // namespace

std::vector<Finding> CheckKernelLog(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    const NodeHealth& h = n->health;
    if (!h.kernel_log_error.empty() && GpuNode(*n)) {
      out.push_back(Make(Severity::kWarning, "kernel-log", "", {n->host},
                         fmt::format("node {}: the kernel log cannot be read ({}), so its Xid "
                                     "errors and the host's hardware errors were not checked",
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
    // EDAC's counters, where the node has them, are the record of its memory errors
    // (memory_error_checks.cpp): its EDAC lines are not counted again.
    const bool counted = !h.memory_error_counts.empty();
    for (const HostErrorEvent& e : h.host_errors) {
      const bool edac =
          e.kind == HostErrorKind::kMemoryUncorrected || e.kind == HostErrorKind::kMemoryCorrected;
      if (counted && edac && e.subject.rfind("EDAC ", 0) == 0) continue;
      out.push_back(HostErrorFinding(*n, e));
    }
    if (h.host_error_lines_total > h.host_error_lines_sent) {
      out.push_back(Make(
          Severity::kWarning, "host-errors", "", {n->host},
          fmt::format("node {}: the kernel log holds {} lines of hardware errors this boot, of "
                      "which the probe sent {} (the uncorrected first): the counts above are of "
                      "those",
                      n->host, h.host_error_lines_total, h.host_error_lines_sent),
          "read them all on the node (dmesg, journalctl -k); a flood of corrected errors is a "
          "device or link to watch"));
    }
  }
  return out;
}

}  // namespace dtrain
