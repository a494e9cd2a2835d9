// NodeHealth: what the probe found about a node's fitness to run a job, beside its versions:
// each GPU's state from nvidia-smi, NVLink, Fabric Manager, Xid errors in the kernel log,
// InfiniBand ports, and the host (free space, swap, clock source). Part of NodeFacts.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "doctor/nvidia_smi_report.h"
#include "doctor/host_error_events.h"
#include "doctor/xid_events.h"

namespace dtrain {

// /sys/class/infiniband/<device>/ports/<port>: "mlx5_0/1", "4: ACTIVE", "5: LinkUp",
// "400 Gb/sec (4X NDR)", "InfiniBand" (or "Ethernet" for RoCE).
// `counters`: the port's error counters that a flaky link makes grow, by their sysfs names
// (counters/symbol_error, link_error_recovery, link_downed, port_rcv_errors,
// local_link_integrity_errors); those the port does not have are left out.
struct InfinibandPort {
  std::string name, state, phys_state, rate, link_layer;
  std::map<std::string, long long> counters;
  bool Up() const { return state == "4: ACTIVE" && phys_state == "5: LinkUp"; }
};

// An InfiniBand/RoCE NIC's PCIe Advanced Error Reporting totals since boot
// (/sys/class/infiniband/<name>/device/aer_dev_{correctable,nonfatal,fatal}, TOTAL_ERR_*):
// "correctable", "nonfatal", "fatal" -> count; those the kernel does not show are left out.
struct NicPcieErrors {
  std::string nic;
  std::map<std::string, long long> totals;
};

// A device a job's traffic passes, found in sysfs: a GPU (vendor 0x10de, class 0x0300/0x0302) or
// an InfiniBand/RoCE NIC (/sys/class/infiniband/<name>/device), with the PCI bridges between it
// and the CPU, root port first, and the type of its IOMMU group ("DMA-FQ", "DMA", "identity";
// "" without an IOMMU).
struct PciPathDevice {
  std::string kind;  // "gpu" or "nic"
  std::string name;  // the NIC's name ("mlx5_0"); "" for a GPU
  std::string address;
  std::string iommu_type;
  std::vector<std::string> bridges;
};

// The ACS control register of a bridge on such a path (PCIe Access Control Services, extended
// capability 0x000d, offset 6), or -1 when its extended configuration space could not be read
// (reading it takes root). Bridges without the capability are not listed.
struct PciBridgeAcs {
  std::string address;
  int control = -1;
};

// Free space where a job writes: "workdir", "log dir", "/tmp" (the nearest existing folder of
// the path is measured), and the type of the file system mounted there ("ext4", "nfs4"; "" where
// the probe could not tell).
struct FreeSpace {
  std::string what, path, mount;
  long long free_kib = -1;
  std::string type;
};

// A write where a job writes ("workdir", "log dir", "/tmp"): 64 KiB to a new file in `folder`,
// the nearest existing folder of `path`, synced and removed. `result`: "ok"; the step that failed
// and the system's reason ("fsync: Input/output error"); or "timeout S" (it had not ended after S
// seconds: the disk hangs).
struct WriteTest {
  std::string what, folder, path, result;
};

// The node's shared memory (/dev/shm; its size is NodeFacts::shm_kib): its free space (-1: not
// read) and, where 64 MiB or more of it is used, what no process holds there, all of it and the
// libraries' segments among it (templates/shm_segments.sh: leftovers of processes killed before
// they removed them), and its biggest files. A file's `held`: 1 a process maps it or holds it open,
// 0 none does, -1 the probe's user cannot tell (another user's file).
struct SharedMemoryFile {
  long long kib = 0;  // what it takes in memory
  std::string uid, owner, name;
  long long mtime = 0, age_s = 0;
  int held = -1;
  bool segment = false;  // named as a library's segment (psm_*, torch_*, nccl-*, ...)
};
struct SharedMemory {
  long long free_kib = -1;
  long long unheld_kib = 0, unheld_files = 0;
  long long unheld_segment_kib = 0, unheld_segments = 0;
  std::vector<SharedMemoryFile> files;  // the biggest first, at most 20
};

// The kernel's neighbour table of one address family ("IPv4": ARP, "IPv6": NDISC), which the
// whole machine shares: entries now, how often it was full since boot (an address then cannot be
// resolved: "neighbor table overflow!" in the kernel log), and its limits (gc_thresh1..3: below
// the first nothing is collected; past the third no entry is added). -1: not read.
struct NeighbourTable {
  std::string family;
  long long entries = -1, fulls = -1;
  long long gc_thresh1 = -1, gc_thresh2 = -1, gc_thresh3 = -1;
};

// A network interface as the kernel shows it: operstate ("up", "down", "unknown" for some virtual
// devices that are up) and addresses in CIDR form.
struct NetworkInterface {
  std::string name, state;
  std::vector<std::string> addresses;
  bool addresses_known = true;  // false where the node has no `ip`
};

// One of the cluster file's health checks as the probe ran it on the node.
struct HealthCheckAnswer {
  size_t index = 0;  // in ClusterSpec::health_checks
  int exit_status = -1;
  long long ms = 0;       // how long it ran
  std::string last_line;  // the last non-empty line it printed
};

// EDAC's memory error counters since boot (/sys/devices/system/edac/mc): a memory controller's
// totals (`dimm` empty), or one of its DIMMs (or ranks) with an error and its label.
struct MemoryErrorCount {
  std::string controller, dimm, label;
  long long corrected = 0, uncorrected = 0;
};

struct NodeHealth {
  // nvidia-smi: > 0 when one of its calls did not answer within this many seconds.
  double smi_timeout_s = 0;
  bool smi_reported = false;  // `nvidia-smi -q` printed a report
  std::string smi_error;      // what `nvidia-smi -q` printed when it failed
  NvidiaSmiReport smi;
  int gpus_in_driver = 0;           // /proc/driver/nvidia/gpus: the GPUs the kernel module holds
  std::vector<int> nvlink_peers;    // `topo -m`: per GPU, the GPUs it reaches over NVLink
  std::vector<GpuNvlinks> nvlinks;  // `nvlink -s`
  bool nvswitch_devices = false;    // /dev/nvidia-nvswitch* exist
  std::string fabric_manager;       // systemctl is-active nvidia-fabricmanager; "" unknown
  // `nvlink -e`: each link's error counters.
  std::vector<NvlinkErrorCount> nvlink_errors;

  // Kernel log of this boot.
  std::string kernel_log;        // "dmesg" or "journalctl"; "" when not read
  std::string kernel_log_error;  // why it could not be read
  std::vector<XidEvent> xids;
  long long xid_lines_total = 0;  // Xid/SXid lines in the log (the probe sends at most 400)
  std::vector<HostErrorEvent> host_errors;
  std::vector<MemoryErrorCount> memory_error_counts;  // empty where the node has no EDAC driver
  long long host_error_lines_total = 0;  // their lines in the log (the probe sends at most 400)
  long long host_error_lines_sent = 0;

  // InfiniBand / RoCE.
  std::vector<InfinibandPort> ib_ports;
  std::string peermem;  // nvidia_peermem loaded: "yes", "no"; "" when there are no IB devices
  std::vector<NicPcieErrors> nic_pcie_errors;

  // PCI paths of the GPUs and NICs.
  std::vector<PciPathDevice> pci_devices;
  std::vector<PciBridgeAcs> pci_acs;

  // Host.
  long long swap_kib = -1;  // SwapTotal
  std::string clocksource, clocksources_available;
  std::vector<FreeSpace> free_space;
  std::vector<WriteTest> write_tests;
  SharedMemory shm;
  std::vector<NeighbourTable> neighbour_tables;
  std::vector<HealthCheckAnswer> health_checks;

  // Network interfaces (`interfaces_read`: the probe listed them) and the variables that name
  // interfaces for NCCL, Gloo and Horovod as the probe's environment (the ranks') set them.
  bool interfaces_read = false;
  std::vector<NetworkInterface> interfaces;
  std::map<std::string, std::string> interface_env;

  // The GPU whose PCI address is `device` (PciDeviceKey form), or nullptr.
  const GpuHealth* GpuAt(const std::string& device) const {
    for (const GpuHealth& g : smi.gpus) {
      if (PciDeviceKey(g.bus_id) == device) return &g;
    }
    return nullptr;
  }
  // The ACS entry of bridge `address`, or nullptr.
  const PciBridgeAcs* AcsOf(const std::string& address) const {
    for (const PciBridgeAcs& a : pci_acs) {
      if (a.address == address) return &a;
    }
    return nullptr;
  }
};

}  // namespace dtrain
