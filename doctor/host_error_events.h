// The host's hardware errors in a node's kernel log of this boot (besides the GPUs' Xids): memory
// errors (EDAC, memory failure), machine checks, PCIe AER errors, a drive's I/O errors and NVMe
// timeouts, file systems the kernel found broken, tasks blocked in the kernel, CPU lockups and
// thermal throttling. Read from the lines the kernel prints for them (the formats of
// drivers/edac/edac_mc.c, mm/memory-failure.c, arch/x86/kernel/cpu/mce, drivers/pci/pcie/aer.c,
// block/blk-core.c, drivers/nvme/host, fs/ext4, fs/xfs, kernel/hung_task.c, kernel/watchdog.c and
// arch/x86/kernel/cpu/thermal; older and newer kernels' wordings both).
#pragma once

#include <string>
#include <vector>

namespace dtrain {

enum class HostErrorKind {
  kMemoryUncorrected,  // "EDAC MC0: 1 UE ...", "Memory failure: 0x1234: recovery action ..."
  kMemoryCorrected,    // "EDAC MC0: 3 CE ..."
  kMachineCheck,   // "mce: [Hardware Error]: Machine check events logged", GHES fatal/recoverable
  kPcieFatal,      // "PCIe Bus Error: severity=Uncorrected (Fatal)" (newer: Uncorrectable)
  kPcieNonFatal,   // "severity=Uncorrected (Non-Fatal)"
  kPcieCorrected,  // "severity=Corrected" (newer: Correctable)
  kDriveIo,        // "I/O error, dev sda, sector ...", "critical medium error, dev ..."
  kNvme,           // "nvme nvme0: I/O 12 QID 3 timeout, aborting", "controller is down"
  kFileSystem,     // "EXT4-fs error (device sda1)", "Remounting filesystem read-only", XFS
  kHungTask,       // "INFO: task jbd2/sda1-8:312 blocked for more than 120 seconds."
  kLockup,         // "watchdog: BUG: soft lockup - CPU#3 stuck for 23s!", hard LOCKUP
  kThermal,        // "CPU3: Core temperature above threshold, cpu clock throttled ..."
};

// The kind's name in the doctor's JSON: "memory-uncorrected", "pcie-fatal", "hung-task", ...
const char* HostErrorKindName(HostErrorKind kind);

// One kind of error on one subject, with how often it occurred.
struct HostErrorEvent {
  HostErrorKind kind;
  // What it concerns: "EDAC MC0 (CPU_SrcID#0_MC#0_Chan#1_DIMM#0)", "0000:5d:00.0", "nvme0n1",
  // "nvme0", "sda1", "jbd2/sda1-8", "CPU 3"; "" where the line names none.
  std::string subject;
  long long count = 0;  // errors (EDAC lines count several), else lines
  std::string line;     // the first such line, without its timestamp
};

// The events of `lines` (kernel log lines, with or without dmesg's "[   12.345678] " stamps), one
// per kind and subject in the order first seen; lines of no kind are skipped.
std::vector<HostErrorEvent> ParseHostErrorLines(const std::vector<std::string>& lines);

}  // namespace dtrain
