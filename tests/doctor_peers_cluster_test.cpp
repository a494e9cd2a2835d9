// The doctor's peer test over SSH on real sshd nodes in network namespaces (tests/cluster): the
// nodes connect to each other where the job's collectives will (the addresses in the cluster file,
// or the interfaces the job's variables name). A node whose second NIC is up but whose switch port
// was taken off the bridge is named alone; a Docker bridge every GPU node has, in NCCL's own pick
// of interfaces, is named with the value that leaves it out.
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/doctor_run.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using test::DoctorRun;
using test::Findings;
using test::RunOutput;
using test::SshTestCluster;

// A node whose second NIC is up but reaches nobody: node2's switch port taken off the bridge (a
// port in the wrong VLAN). The interface rule sees hsn0 up with its address; the peer test finds
// that node2 connects with neither other node over it while they connect with each other, and
// names node2 alone. Before the fault, the test passes over hsn0 and, without the job's
// variables, at the nodes' addresses in the cluster file.
TEST(DoctorPeersCluster, NamesANodeWhoseInterfaceReachesNoOther) {
  SshTestCluster cluster("doctor-peers", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = cluster.dir();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  std::ofstream(dir + "/job.env") << "NCCL_SOCKET_IFNAME=hsn0\n";
  const std::string file = dir + "/peers.yaml";
  // A job other than dtrain-clip, which a build without the runtime lacks (an error of its own).
  std::ofstream(file) << test::ReadText(cluster.cluster_file())
                      << "env_file: job.env\njob: {command: [hostname]}\n";

  const DoctorRun plain = test::RunDoctor("--json", cluster.cluster_file());
  ASSERT_EQ(Findings(plain, "peers", "ok").size(), 1u) << plain.text;
  EXPECT_EQ(Findings(plain, "peers", "ok")[0]["message"].get<std::string>().rfind(
                "every node connects to every other at their addresses in the cluster file (3 "
                "pair(s), the slowest connection in ",
                0),
            0u)
      << plain.text;
  const DoctorRun healthy = test::RunDoctor("--json", file);
  ASSERT_EQ(Findings(healthy, "peers", "ok").size(), 1u) << healthy.text;
  EXPECT_NE(Findings(healthy, "peers", "ok")[0]["message"].get<std::string>().find(
                "over hsn0 (NCCL_SOCKET_IFNAME) (3 pair(s)"),
            std::string::npos);
  const auto& peers = healthy.doc["peer_connections"];
  EXPECT_EQ(peers["nodes"]["node2"]["addresses"][0]["address"], "10.232.0.12") << peers.dump();
  EXPECT_EQ(peers["connections_made"], 6) << peers.dump();
  EXPECT_TRUE(peers["failed_connections"].empty()) << peers.dump();

  EXPECT_EQ(test::SetSecondNicPort(cluster, 2, "nomaster"), "");
  const DoctorRun r = test::RunDoctor("--json --exclude-bad -o " + dir + "/good.txt", file);
  EXPECT_EQ(r.status, 1) << r.text;
  EXPECT_TRUE(Findings(r, "interface", "error").empty()) << r.text;  // hsn0 is up on node2
  const auto errors = Findings(r, "peers", "error");
  ASSERT_EQ(errors.size(), 1u) << r.text;
  EXPECT_EQ(errors[0]["nodes"], nlohmann::json({"node2"}));
  const std::string message = errors[0]["message"];
  EXPECT_EQ(message.rfind("node node2 (10.232.0.12) cannot connect with any of the other 2 "
                          "node(s) over hsn0 (NCCL_SOCKET_IFNAME), which connect with each "
                          "other: node0 -> node2 10.232.0.12: ",
                          0),
            0u)
      << message;
  const auto& failed = r.doc["peer_connections"]["failed_connections"];
  EXPECT_EQ(failed.size(), 4u) << failed.dump();  // both ways with node0 and with node1
  for (const auto& c : failed) {
    EXPECT_TRUE(c["from"] == "node2" || c["to"] == "node2") << c.dump();
  }
  EXPECT_EQ(r.doc["peer_connections"]["connections_made"], 2);
  EXPECT_NE(r.text.find("wrote " + dir + "/good.txt: 2 of 3 nodes; left out: node2"),
            std::string::npos)
      << r.text;
  // Not reached within the test's wait: the connection attempts' limit, not the doctor's.
  EXPECT_LT(r.wall_s, 15) << r.text;
}

// GPU nodes with NCCL_SOCKET_IFNAME unset, each with a Docker network's bridge (br-3f2a,
// 172.18.0.1, no container on it, so its link is down): NCCL's own pick takes the bridge beside
// eth0 (it looks at names, not link state), and a connection to 172.18.0.1 from any node reaches
// the node itself. The peer test names the address every node has, with the variable's value
// that leaves the bridge out; with that value set, the nodes connect over eth0.
TEST(DoctorPeersCluster, NamesABridgeEveryGpuNodeHasInNcclsOwnPick) {
  SshTestCluster cluster("doctor-bridge", 3, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 3; ++i) {
    const std::string ns = cluster.Field(i, 2);
    EXPECT_EQ(RunOutput("ip -n " + ns + " link add br-3f2a type bridge && ip -n " + ns +
                        " addr add 172.18.0.1/16 dev br-3f2a && ip -n " + ns +
                        " link set br-3f2a up 2>&1"),
              "");
  }
  test::HgxNodes(cluster, 3);
  const DoctorRun r = test::RunDoctor("--json", test::StandInClusterFile(cluster, 3, ""));
  EXPECT_EQ(r.status, 1) << r.text;
  const auto errors = Findings(r, "peers", "error");
  ASSERT_EQ(errors.size(), 1u) << r.text;
  EXPECT_EQ(errors[0]["message"],
            "nodes node0, node1, node2 all have the address 172.18.0.1 on br-3f2a, which NCCL "
            "picks with NCCL_SOCKET_IFNAME unset: the collectives' connections to one of them "
            "reach another, or the node itself");
  const std::string remedy = errors[0]["remedy"];
  const std::string value = "^br-3f2a,docker,lo,virbr";
  EXPECT_NE(remedy.find("NCCL_SOCKET_IFNAME=" + value), std::string::npos) << remedy;
  std::map<std::string, std::string> node1;  // interface -> address
  for (const auto& a : r.doc["peer_connections"]["nodes"]["node1"]["addresses"]) {
    node1[a["interface"]] = a["address"];
  }
  EXPECT_EQ(node1, (std::map<std::string, std::string>{{"br-3f2a", "172.18.0.1"},
                                                       {"eth0", "10.231.0.11"}}));
  // eth0 is tested; the bridge's address is not.
  EXPECT_EQ(r.doc["peer_connections"]["connections_made"], 6) << r.doc["peer_connections"].dump();
  EXPECT_TRUE(r.doc["peer_connections"]["failed_connections"].empty());

  const DoctorRun fixed = test::RunDoctor(
      "--json", test::StandInClusterFile(cluster, 3, "env: {NCCL_SOCKET_IFNAME: '" + value + "'}\n",
                                         "fixed.yaml"));
  EXPECT_TRUE(Findings(fixed, "peers", "error").empty()) << fixed.text;
  ASSERT_EQ(Findings(fixed, "peers", "ok").size(), 1u) << fixed.text;
  EXPECT_NE(Findings(fixed, "peers", "ok")[0]["message"].get<std::string>().find(
                "every node connects to every other over eth0 (NCCL_SOCKET_IFNAME) (3 pair(s)"),
            std::string::npos)
      << fixed.text;
}

}  // namespace
}  // namespace dtrain
