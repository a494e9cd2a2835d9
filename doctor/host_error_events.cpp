// Kernel log lines -> HostErrorEvent: a pattern per wording the kernel prints for each kind.
#include "doctor/host_error_events.h"

#include <cstdlib>
#include <map>
#include <regex>
#include <utility>

namespace dtrain {
namespace {

struct LinePattern {
  HostErrorKind kind;
  std::regex pattern;
  // The subject, made of the match's groups ("EDAC $1, $3"); "" for none.
  std::string subject;
  int count_group = 0;  // the group holding the count, else 0: one per line
};

const std::vector<LinePattern>& Patterns() {
  using K = HostErrorKind;
  const auto flags = std::regex::ECMAScript | std::regex::optimize;
  static const std::vector<LinePattern> patterns = {
      // drivers/edac/edac_mc.c: "EDAC MC0: 1 CE memory read error on DIMM_A1 (channel:0 ...)";
      // the label may be "any memory" or "unknown memory".
      {K::kMemoryUncorrected, std::regex(R"(EDAC (MC\d+): (\d+) UE .*?\bon (.+?) \()", flags),
       "EDAC $1, $3", 2},
      {K::kMemoryCorrected, std::regex(R"(EDAC (MC\d+): (\d+) CE .*?\bon (.+?) \()", flags),
       "EDAC $1, $3", 2},
      // Older drivers: "EDAC MC0: UE page 0x1234, offset 0x0, ..." and "EDAC MC0: CE page ...".
      {K::kMemoryUncorrected, std::regex(R"(EDAC (MC\d+): UE )", flags), "EDAC $1", 0},
      {K::kMemoryCorrected, std::regex(R"(EDAC (MC\d+): CE )", flags), "EDAC $1", 0},
      // mm/memory-failure.c, once per poisoned page the kernel handled.
      {K::kMemoryUncorrected,
       std::regex(R"(Memory failure: (0x[0-9a-f]+): recovery action for)", flags), "", 0},
      // arch/x86/kernel/cpu/mce: corrected and uncorrected events alike; firmware-first (GHES).
      {K::kMachineCheck, std::regex(R"(\[Hardware Error\]: Machine check events logged)", flags),
       "", 0},
      {K::kMachineCheck, std::regex(R"(\[Hardware Error\]: CPU (\d+): Machine Check)", flags),
       "CPU $1", 0},
      {K::kMachineCheck,
       std::regex(R"(\[Hardware Error\]: event severity: (fatal|recoverable))", flags), "", 0},
      // drivers/pci/pcie/aer.c: "pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, ...";
      // the kind is the severity's (PcieKind).
      {K::kPcieCorrected,
       std::regex(
           R"(([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): PCIe Bus Error: severity=(Uncorrect(?:ed|able) \((?:Fatal|Non-Fatal)\)|Correct(?:ed|able)))",
           flags),
       "$1", 0},
      // block/blk-core.c (older: "blk_update_request: I/O error, dev sda, sector 0").
      {K::kDriveIo,
       std::regex(
           R"((?:I/O|critical medium|critical target|critical nexus|protection) error, dev ([^,\s]+), sector)",
           flags),
       "$1", 0},
      // drivers/nvme/host: a command that timed out, a controller that went away.
      {K::kNvme,
       std::regex(
           R"(nvme (nvme\d+): (?:I/O .*QID \d+ timeout|controller is down|Device not ready|Removing after probe failure|Disabling device after reset failure))",
           flags),
       "$1", 0},
      // File systems the kernel found broken, or turned read-only or shut down.
      {K::kFileSystem, std::regex(R"(EXT4-fs error \(device ([^)]+)\))", flags), "$1", 0},
      {K::kFileSystem, std::regex(R"(EXT4-fs \(([^)]+)\): Remounting filesystem read-only)", flags),
       "$1", 0},
      {K::kFileSystem,
       std::regex(
           R"(XFS \(([^)]+)\): (?:.*Shutting down filesystem|metadata I/O error|Corruption (?:of in-memory data )?detected))",
           flags),
       "$1", 0},
      {K::kFileSystem, std::regex(R"(BTRFS (?:error|critical) \(device ([^)]+))", flags), "$1", 0},
      // kernel/hung_task.c: "INFO: task jbd2/sda1-8:312 blocked for more than 120 seconds."
      {K::kHungTask, std::regex(R"(INFO: task .+:\d+ blocked for more than \d+ seconds)", flags),
       "", 0},
      // kernel/watchdog.c and RCU's stall warnings.
      {K::kLockup,
       std::regex(
           R"(soft lockup - CPU#\d+ stuck for|hard LOCKUP on cpu \d+|rcu: INFO: rcu_\w+ (?:self-)?detected stall)",
           flags),
       "", 0},
      // arch/x86/kernel/cpu/thermal: "CPU3: Core temperature above threshold, cpu clock
      // throttled (total events = 1)" (newer: "temperature is above threshold").
      {K::kThermal,
       std::regex(R"(CPU\d+: (?:Core|Package) temperature (?:is )?above threshold)", flags), "", 0},
  };
  return patterns;
}

// An AER line's kind, from its severity: "Uncorrected (Fatal)" (newer kernels: "Uncorrectable"),
// "Uncorrected (Non-Fatal)", "Corrected" ("Correctable").
HostErrorKind PcieKind(const std::string& severity) {
  if (severity.find("(Fatal)") != std::string::npos) return HostErrorKind::kPcieFatal;
  if (severity.find("(Non-Fatal)") != std::string::npos) return HostErrorKind::kPcieNonFatal;
  return HostErrorKind::kPcieCorrected;
}

// Devices whose errors say nothing of the node's hardware: loop devices (a file's, whose own drive
// reports its errors), optical and floppy drives (a virtual machine's, often empty).
bool IgnoredDevice(const std::string& device) {
  for (const char* prefix : {"loop", "sr", "fd", "ram", "zram"}) {
    const std::string p = prefix;
    if (device.compare(0, p.size(), p) == 0) return true;
  }
  return false;
}

// The line without dmesg's "[   12.345678] " or journalctl's "Dec 07 10:12:13 host kernel: ".
std::string Unstamped(const std::string& line) {
  static const std::regex stamp(
      R"(^(?:\[\s*\d+\.\d+\]\s*|\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: ))");
  return std::regex_replace(line, stamp, "", std::regex_constants::format_first_only);
}

bool DeviceKind(HostErrorKind kind) {
  return kind == HostErrorKind::kDriveIo || kind == HostErrorKind::kFileSystem;
}

}  // namespace

const char* HostErrorKindName(HostErrorKind kind) {
  switch (kind) {
    case HostErrorKind::kMemoryUncorrected:
      return "memory-uncorrected";
    case HostErrorKind::kMemoryCorrected:
      return "memory-corrected";
    case HostErrorKind::kMachineCheck:
      return "machine-check";
    case HostErrorKind::kPcieFatal:
      return "pcie-fatal";
    case HostErrorKind::kPcieNonFatal:
      return "pcie-non-fatal";
    case HostErrorKind::kPcieCorrected:
      return "pcie-corrected";
    case HostErrorKind::kDriveIo:
      return "drive-io";
    case HostErrorKind::kNvme:
      return "nvme";
    case HostErrorKind::kFileSystem:
      return "file-system";
    case HostErrorKind::kHungTask:
      return "hung-task";
    case HostErrorKind::kLockup:
      return "lockup";
    case HostErrorKind::kThermal:
      return "thermal";
  }
  return "";
}

std::vector<HostErrorEvent> ParseHostErrorLines(const std::vector<std::string>& lines) {
  std::vector<HostErrorEvent> out;
  std::map<std::pair<HostErrorKind, std::string>, size_t> at;
  for (const std::string& raw : lines) {
    const std::string line = Unstamped(raw);
    for (const LinePattern& p : Patterns()) {
      std::smatch m;
      if (!std::regex_search(line, m, p.pattern)) continue;
      const std::string subject = p.subject.empty() ? "" : m.format(p.subject);
      if (DeviceKind(p.kind) && IgnoredDevice(m.str(1))) break;
      const HostErrorKind kind =
          p.kind == HostErrorKind::kPcieCorrected ? PcieKind(m.str(2)) : p.kind;
      long long count = 1;
      if (p.count_group > 0) count = std::strtoll(m.str(p.count_group).c_str(), nullptr, 10);
      auto [it, fresh] = at.emplace(std::make_pair(kind, subject), out.size());
      if (fresh) out.push_back({kind, subject, 0, line});
      out[it->second].count += count;
      break;  // one kind a line
    }
  }
  return out;
}

}  // namespace dtrain
