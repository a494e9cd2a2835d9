// The rules about the PCI paths of a node's GPUs and InfiniBand/RoCE NICs (from sysfs). On bare
// metal (nvidia-smi's Virtualization Mode "None"), PCIe switch ports whose Access Control
// Services redirect peer-to-peer requests, and an IOMMU that translates the devices' DMA, send
// GPU-to-GPU and GPU-to-NIC traffic through the CPU's root complex: slower, and NCCL can hang
// (NCCL's troubleshooting guide, "PCI Access Control Services"). In a virtual machine both are
// the hypervisor's business and are not judged.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"

namespace dtrain {

using checks::Join;
using checks::Make;
using checks::Reached;

namespace {

// ACS control bits (PCIe base specification, ACS Control Register), named as lspci names them.
constexpr const char* kAcsBitNames[] = {"SrcValid",    "TransBlk",   "ReqRedir",   "CmpltRedir",
                                        "UpstreamFwd", "EgressCtrl", "DirectTrans"};
// The bits that send a peer-to-peer request or completion up to the root complex instead of to
// the peer below the same switch: P2P Request Redirect, P2P Completion Redirect, P2P Egress
// Control.
constexpr int kAcsRedirectBits = 0x04 | 0x08 | 0x20;

// "SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+": the bits set, as lspci's ACSCtl line shows them.
std::string AcsBits(int control) {
  std::vector<std::string> set;
  for (int bit = 0; bit < 7; ++bit) {
    if (control & (1 << bit)) set.push_back(std::string(kAcsBitNames[bit]) + "+");
  }
  return Join(set, " ");
}

bool BareMetal(const NodeHealth& h) {
  return !h.smi.gpus.empty() &&
         std::all_of(h.smi.gpus.begin(), h.smi.gpus.end(),
                     [](const GpuHealth& g) { return g.virtualization_mode == "None"; });
}

// "GPU 3" (nvidia-smi's index), "GPU 0000:1b:00.0" when nvidia-smi does not list it, "mlx5_0".
std::string DeviceLabel(const NodeHealth& h, const PciPathDevice& d) {
  if (d.kind == "nic") return d.name;
  const GpuHealth* g = h.GpuAt(PciDeviceKey(d.address));
  return g ? fmt::format("GPU {}", g->index) : "GPU " + d.address;
}

}  // namespace

std::vector<Finding> CheckPciPaths(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    const NodeHealth& h = n->health;
    if (!BareMetal(h)) continue;
    // Bridges below the root port (the ports of PCIe switches) that redirect, with the devices
    // under each, in the order the probe found them.
    std::vector<std::string> bridges;
    std::map<std::string, std::vector<std::string>> below;
    std::vector<std::string> translated;
    std::string iommu_type;
    for (const PciPathDevice& d : h.pci_devices) {
      for (size_t i = 1; i < d.bridges.size(); ++i) {
        const PciBridgeAcs* acs = h.AcsOf(d.bridges[i]);
        if (!acs || acs->control < 0 || !(acs->control & kAcsRedirectBits)) continue;
        if (!below.count(d.bridges[i])) bridges.push_back(d.bridges[i]);
        below[d.bridges[i]].push_back(DeviceLabel(h, d));
      }
      if (d.iommu_type == "DMA" || d.iommu_type == "DMA-FQ") {
        translated.push_back(DeviceLabel(h, d));
        iommu_type = d.iommu_type;
      }
    }
    if (!bridges.empty()) {
      std::vector<std::string> items;
      for (const std::string& b : bridges) {
        items.push_back(fmt::format("{} above {} (ACSCtl {})", b, Join(below[b]),
                                    AcsBits(h.AcsOf(b)->control)));
      }
      out.push_back(Make(
          Severity::kWarning, "pci-acs", "", {n->host},
          fmt::format("node {}: PCIe switch port{} with ACS redirecting peer-to-peer traffic to "
                      "the CPU: {}",
                      n->host, bridges.size() == 1 ? "" : "s", Join(items, "; ")),
          "disable ACS on those ports (sudo setpci -s PORT ECAP_ACS+0x6.w=0000, again after each "
          "reboot) or IO virtualization (VT-d, AMD-Vi) in the BIOS: with it, GPU-to-GPU and "
          "GPUDirect RDMA traffic crosses the CPU's root complex, slower, and NCCL may hang"));
    }
    if (!translated.empty()) {
      out.push_back(Make(
          Severity::kWarning, "iommu", "", {n->host},
          fmt::format("node {}: the IOMMU translates the DMA of {} (IOMMU group type {})", n->host,
                      Join(translated), iommu_type),
          "boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt) or turn IO "
          "virtualization off in the BIOS: translated DMA sends peer-to-peer and GPUDirect RDMA "
          "traffic through the CPU's root complex"));
    }
  }
  return out;
}

}  // namespace dtrain
