// The doctor's rules on the PCI paths of GPUs and NICs (pci-acs, iommu) and on the memory a job
// may lock where RDMA needs it (memlock), from probe lines (tests/support/health_probes.h). The
// layout is one PCIe switch of an HGX H100 node: root port 0000:15:01.0, the switch's upstream
// port 0000:16:00.0, and two of its downstream ports, 0000:17:00.0 above GPU 0 (0000:18:00.0)
// and 0000:17:01.0 above the NIC mlx5_0 (0000:19:00.0).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/checks.h"
#include "tests/support/health_probes.h"

namespace dtrain {
namespace {

using test::Describe;
using test::GpuProbeLines;
using test::Has;
using test::Health;
using test::HgxQuery;
using test::HgxTopology;
using test::Node;
using test::NvlinkStatus;
using test::Only;
using test::RecordedProbeBase;
using test::WithField;

// The HGX query with every GPU's Virtualization Mode set to `mode` ("None" on bare metal; the
// recorded node is a virtual machine, "Pass-Through").
std::string QueryIn(const std::string& mode) {
  std::string q = HgxQuery();
  for (int g = 0; g < 8; ++g) {
    q = WithField(q, g, "GPU Virtualization Mode", "Virtualization Mode", mode);
  }
  return q;
}

// An HGX node whose probe also printed `extra` lines.
std::string Probe(const std::string& extra, const std::string& mode = "None") {
  return RecordedProbeBase(8) + GpuProbeLines(8, QueryIn(mode), HgxTopology(), NvlinkStatus()) +
         extra + "probe_end=1\n";
}

// The switch's lines as the probe prints them, with `control` the ACS control register (hex, or
// "unreadable") of every port and `iommu` the devices' IOMMU group type.
std::string SwitchLines(const std::string& control, const std::string& iommu = "") {
  return "pci_acs=0000:15:01.0;" + control + "\npci_acs=0000:17:00.0;" + control +
         "\npci_device=gpu;;0000:18:00.0;" + iommu +
         ";0000:15:01.0,0000:16:00.0,0000:17:00.0\npci_acs=0000:17:01.0;" + control +
         "\npci_device=nic;mlx5_0;0000:19:00.0;" + iommu +
         ";0000:15:01.0,0000:16:00.0,0000:17:01.0\n";
}

TEST(DoctorHealth, AcsRedirectingOnSwitchPortsOfGpusAndNicsOnBareMetal) {
  auto findings = Health({Node("hgx-a", Probe(SwitchLines("001d")))});
  const Finding* f = Only(findings, "pci-acs");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  // The root port has the same bits and is not named: traffic between root ports crosses the
  // root complex anyway.
  EXPECT_EQ(f->message,
            "node hgx-a: PCIe switch ports with ACS redirecting peer-to-peer traffic to the CPU: "
            "0000:17:00.0 above GPU 0 (ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+); "
            "0000:17:01.0 above mlx5_0 (ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+)");
  EXPECT_TRUE(Has(f->remedy, "setpci -s PORT ECAP_ACS+0x6.w=0000")) << f->remedy;
  EXPECT_EQ(Only(findings, "iommu"), nullptr) << Describe(findings);

  // Egress control alone redirects too; source validation alone does not.
  findings = Health({Node("hgx-a", Probe(SwitchLines("0020")))});
  ASSERT_TRUE(Only(findings, "pci-acs")) << Describe(findings);
  EXPECT_TRUE(Has(Only(findings, "pci-acs")->message, "(ACSCtl EgressCtrl+)"));
  EXPECT_TRUE(Health({Node("hgx-a", Probe(SwitchLines("0001")))}).empty());
  EXPECT_TRUE(Health({Node("hgx-a", Probe(SwitchLines("0000")))}).empty());
  // Not judged: in a virtual machine, and where the registers could not be read.
  EXPECT_TRUE(Health({Node("hgx-a", Probe(SwitchLines("001d"), "Pass-Through"))}).empty());
  EXPECT_TRUE(Health({Node("hgx-a", Probe(SwitchLines("unreadable")))}).empty());
}

TEST(DoctorHealth, IommuTranslatingTheDevicesDmaOnBareMetal) {
  auto findings = Health({Node("hgx-a", Probe(SwitchLines("0000", "DMA-FQ")))});
  const Finding* f = Only(findings, "iommu");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->message,
            "node hgx-a: the IOMMU translates the DMA of GPU 0, mlx5_0 (IOMMU group type DMA-FQ)");
  EXPECT_TRUE(Has(f->remedy, "iommu=pt")) << f->remedy;
  EXPECT_TRUE(Health({Node("hgx-a", Probe(SwitchLines("0000", "identity")))}).empty());
  EXPECT_TRUE(Health({Node("hgx-a", Probe(SwitchLines("0000", "DMA"), "Pass-Through"))}).empty());
}

TEST(DoctorHealth, MemlockLimitWhereThereIsInfiniband) {
  const std::string port =
      "ib_port=mlx5_0/1;4: ACTIVE;5: LinkUp;400 Gb/sec (4X NDR);InfiniBand\n"
      "peermem=yes\n";
  auto findings = Health({Node("hgx-a", Probe(port + "memlock=8192\n")),
                          Node("hgx-b", Probe(port + "memlock=unlimited\n")),
                          Node("hgx-c", Probe("memlock=64\n"))});
  const Finding* f = Only(findings, "memlock");
  ASSERT_TRUE(f) << Describe(findings);
  EXPECT_EQ(f->severity, Severity::kWarning);
  EXPECT_EQ(f->nodes, std::vector<std::string>{"hgx-a"});
  EXPECT_EQ(f->message,
            "node hgx-a has InfiniBand/RoCE ports, and a job there may lock only 8192 KiB of "
            "memory (ulimit -l)");
  EXPECT_TRUE(Has(f->remedy, "memlock unlimited")) << f->remedy;
}

}  // namespace
}  // namespace dtrain
