// What the doctor makes of the health findings (tests/support/health_probes.h): the JSON report
// with the health facts, and the hostfile of `--exclude-bad`, read back by the launcher's
// hostfile parser.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "doctor/checks.h"
#include "doctor/healthy_hostfile.h"
#include "doctor/report.h"
#include "launcher/host_list.h"
#include "tests/support/health_probes.h"

namespace dtrain {
namespace {

using test::H100Probe;
using test::Has;
using test::Node;
using test::RecordedQuery;
using test::WithField;

TEST(DoctorHealth, JsonCarriesTheHealthFacts) {
  std::string q = WithField(RecordedQuery(), 0, "Remapped Rows", "Pending", "Yes");
  const std::string probe =
      H100Probe(q, "[ 1.0] NVRM: Xid (PCI:0000:00:06): 48, pid=1, DBE\n",
                "ib_port=mlx5_0/1;4: ACTIVE;5: LinkUp;400 Gb/sec (4X NDR);InfiniBand\n"
                "peermem=yes\n");
  ProbeRun run;
  run.nodes = {Node("gpu-a", probe)};
  ClusterSpec spec;
  spec.nodes.resize(1);
  spec.nodes[0].host = "gpu-a";
  const auto findings = CheckCluster(spec, run);
  const auto doc = nlohmann::json::parse(RenderJsonReport(spec, run, findings));
  const auto& health = doc["nodes"][0]["facts"]["health"];
  ASSERT_EQ(health["gpus"].size(), 1u) << health.dump(2);
  EXPECT_EQ(health["gpus"][0]["remapped_rows_pending"], "Yes");
  EXPECT_EQ(health["gpus"][0]["pcie_width_max"], 16);
  EXPECT_EQ(health["gpus"][0]["nvlink_peers"], 0);
  EXPECT_EQ(health["xids"][0]["code"], 48);
  EXPECT_EQ(health["xids"][0]["gpu"], 0);
  EXPECT_EQ(health["infiniband"][0]["rate"], "400 Gb/sec (4X NDR)");
  EXPECT_EQ(health["nvidia_peermem"], true);
  EXPECT_EQ(health["swap_kib"], 0);
  EXPECT_EQ(health["clocksource"], "tsc");
  EXPECT_EQ(health["free_space"][1]["what"], "/tmp");
  bool remap = false, xid = false;
  for (const auto& f : doc["findings"]) {
    remap = remap || (f["check"] == "gpu-remap" && f["severity"] == "error");
    xid = xid || (f["check"] == "xid" && f["severity"] == "error");
  }
  EXPECT_TRUE(remap && xid) << doc["findings"].dump(2);
}

// --exclude-bad: the healthy nodes, read back by `dtrain launch --hostfile`'s own parser.
TEST(DoctorHealth, ExcludeBadWritesAHostfileLaunchReads) {
  ProbeRun run;
  run.nodes = {
      Node("gpu-a", H100Probe()),
      Node("gpu-b", H100Probe(WithField(RecordedQuery(), 0, "Remapped Rows", "Pending", "Yes"))),
      Node("gpu-c", H100Probe())};
  run.nodes[2].slots = 4;
  run.nodes[2].address = "gpu-c";
  ClusterSpec spec;
  spec.job.command = {"python3", "train.py"};
  for (const NodeFacts& n : run.nodes) {
    NodeSpec s;
    s.host = n.host;
    spec.nodes.push_back(s);
  }
  const HealthyHostfile hostfile = MakeHealthyHostfile(run, CheckCluster(spec, run));
  EXPECT_EQ(hostfile.kept, (std::vector<std::string>{"gpu-a", "gpu-c"}));
  EXPECT_EQ(hostfile.excluded, std::vector<std::string>{"gpu-b"});
  EXPECT_TRUE(Has(hostfile.text, "# excluded gpu-b: node gpu-b: row remapping is pending on GPU 0"))
      << hostfile.text;
  const std::string path = ::testing::TempDir() + "/healthy-hosts";
  EXPECT_TRUE(Has(WriteHealthyHostfile(path, hostfile), "2 of 3 nodes; left out: gpu-b"));
  const std::vector<NodeSpec> nodes = ParseHostfile(path);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].host, run.nodes[0].address);
  EXPECT_EQ(nodes[0].slots, 1);
  EXPECT_EQ(nodes[1].host, "gpu-c");
  EXPECT_EQ(nodes[1].slots, 4);
}

}  // namespace
}  // namespace dtrain
