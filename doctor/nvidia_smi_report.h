// What nvidia-smi says about each GPU's health, parsed from the text of three calls the probe
// makes: `nvidia-smi -q` (ECC, remapped rows, PCIe link, clock-event reasons, processes, fabric),
// `nvidia-smi topo -m` (which GPUs NVLink connects) and `nvidia-smi nvlink -s` (each link's
// state). The formats are those recorded on an H100 in tests/fixtures/h100-node/. None throws;
// a field the text does not hold stays empty (strings) or -1 (numbers).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// One process `nvidia-smi -q` lists under a GPU's `Processes`.
struct GpuProcess {
  long long pid = -1;
  std::string name;
  long long used_mib = -1;
};

// One GPU block of `nvidia-smi -q`: the fields the doctor's health rules read, as printed
// ("Enabled", "Yes", "N/A"), numbers as numbers.
struct GpuHealth {
  int index = 0;       // its place in the report: nvidia-smi's index
  std::string bus_id;  // "00000000:00:06.0"
  std::string name;    // "NVIDIA H100 80GB HBM3"
  std::string persistence_mode;
  // What the driver asks for after a fault (NVML's recovery action): "None"; "Reset", "Reboot",
  // "Drain P2P", "Drain and Reset" as NVIDIA's documentation names them; "" on older drivers.
  std::string recovery_action;
  std::string mig_current, mig_pending;  // MIG Mode: "Enabled", "Disabled", "N/A"
  // GPU Virtualization Mode: "None" on bare metal, "Pass-Through" in a virtual machine.
  std::string virtualization_mode;
  std::string ecc_current, ecc_pending;  // ECC Mode
  // Volatile (since the driver loaded) uncorrectable ECC counts; SRAM sums every
  // "SRAM Uncorrectable*" line (Parity and SEC-DED on drivers >= 550).
  long long dram_uncorrectable = -1, sram_uncorrectable = -1;
  std::string remapped_rows_pending, remapping_failure;  // Remapped Rows
  std::string retired_pages_pending;                     // Retired Pages: Pending Page Blacklist
  int pcie_gen_max = -1, pcie_gen_current = -1;
  int pcie_width_max = -1, pcie_width_current = -1;  // lanes: "16x" -> 16
  // PCIe link-level retries since the GPU's last reset (PCI/Replays Since Reset), and how often
  // the link's replay number rolled over (4 failed replays in a row: the link retrains).
  long long pcie_replays = -1, pcie_replay_rollovers = -1;
  bool idle = false;  // the "Idle" clock-event reason is active: nothing runs on it
  // Active hardware clock-event reasons: "HW Slowdown", "HW Thermal Slowdown",
  // "HW Power Brake Slowdown".
  std::vector<std::string> hw_slowdowns;
  long long fb_used_mib = -1, fb_total_mib = -1;
  // The power limit in force and the board's default (nvidia-smi -pl, a BMC's cap), in watts, and
  // the application clocks against their defaults (nvidia-smi -ac), graphics, in MHz; -1 unknown.
  double power_limit_w = -1, default_power_limit_w = -1;
  long long app_clock_mhz = -1, default_app_clock_mhz = -1;
  std::vector<GpuProcess> processes;
  std::string fabric_state, fabric_status;  // "N/A" without NVSwitches; "Completed", "Success"
};

struct NvidiaSmiReport {
  std::string driver;  // "Driver Version"
  int attached = -1;   // "Attached GPUs"
  std::vector<GpuHealth> gpus;
};
NvidiaSmiReport ParseNvidiaSmiQuery(std::string_view text);

// `nvidia-smi topo -m`: for each GPU row, how many other GPUs it reaches over NVLink (NV#).
std::vector<int> ParseTopologyNvlinkPeers(std::string_view text);

// `nvidia-smi nvlink -s`: each GPU's links ("Link 3: <inactive>" counts as inactive).
struct GpuNvlinks {
  int gpu = -1;
  int active = 0;
  std::vector<int> inactive;  // link numbers
};
std::vector<GpuNvlinks> ParseNvlinkStatus(std::string_view text);

// `nvidia-smi nvlink -e`: each link's error counters below its GPU's line, "Link 3: Replay
// Errors: 0" ("Replay Errors", "Recovery Errors", "CRC Errors"; any other counter the driver
// prints is kept by its name). Lines without a count are left out.
struct NvlinkErrorCount {
  int gpu = -1;
  int link = -1;
  std::string counter;
  long long value = 0;
};
std::vector<NvlinkErrorCount> ParseNvlinkErrors(std::string_view text);

// "00000000:00:06.0" or "0000:00:06" (as Xid lines write it) -> "0000:00:06": domain, bus and
// device in a form both spellings share; "" when the text is not a PCI address.
std::string PciDeviceKey(std::string_view bus_id);

}  // namespace dtrain
