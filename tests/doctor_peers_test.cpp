// The peer connection test (doctor/peer_run.h, peer_verdict.h): the addresses the job's variables
// pick on a node, the probe's peers mode run for real on this machine's loopback addresses (a
// connection made, one refused, another node answering, a foreign listener, a port taken), and
// the verdict: a node cut off named alone, a pair that cannot be blamed on one node naming both,
// two nodes with one address, what could not be tested.
#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/peer_run.h"
#include "doctor/peer_verdict.h"
#include "support/free_port.h"
#include "support/scratch_dirs.h"
#include "support/shell_run.h"

namespace dtrain {

std::string_view ProbeScript();

namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

NetworkInterface Interface(std::string name, std::string state, std::vector<std::string> addrs) {
  NetworkInterface i;
  i.name = std::move(name);
  i.state = std::move(state);
  i.addresses = std::move(addrs);
  return i;
}

NodeFacts Node(const std::string& host, const std::string& address,
               std::map<std::string, std::string> env = {}) {
  NodeFacts n;
  n.host = host;
  n.address = address;
  n.reached = true;
  n.health.interfaces_read = true;
  n.health.interfaces = {Interface("lo", "unknown", {"127.0.0.1/8", "::1/128"}),
                         Interface("eth0", "up", {address + "/24", "fe80::1/64"})};
  n.health.interface_env = std::move(env);
  return n;
}

std::string Addresses(const std::vector<CollectiveEndpoint>& list) {
  std::string out;
  for (const CollectiveEndpoint& e : list) {
    out += (out.empty() ? "" : " ") + (e.interface.empty() ? "-" : e.interface) + "=" + e.address +
           (e.link_up ? "" : "(down)");
  }
  return out;
}

TEST(PeerAddresses, WhatTheJobsVariablesPickAsNcclAndGlooPickIt) {
  NodeFacts n = Node("node0", "10.0.0.10");
  n.health.interfaces.push_back(
      Interface("hsn0", "up", {"fe80::2/64", "10.1.0.10/16", "fd00::10/64"}));
  n.health.interfaces.push_back(Interface("hsn1", "up", {"10.2.0.10/16"}));
  n.health.interfaces.push_back(Interface("hsn2", "lowerlayerdown", {"10.3.0.10/16"}));
  n.health.interfaces.push_back(Interface("ens5", "up", {}));

  // Unset: the node's address in the cluster file, where MASTER_ADDR points.
  std::vector<std::string> variables;
  EXPECT_EQ(Addresses(CollectiveEndpoints(n, &variables)), "-=10.0.0.10");
  EXPECT_TRUE(variables.empty());

  // NCCL: prefixes; the link-local address and an interface without an address left out, a down
  // link said (the interface rule's error; the test leaves it out).
  n.health.interface_env = {{"NCCL_SOCKET_IFNAME", "hsn"}};
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)),
            "hsn0=10.1.0.10 hsn1=10.2.0.10 hsn2=10.3.0.10(down)");
  n.health.interface_env = {{"NCCL_SOCKET_IFNAME", "hsn"}, {"NCCL_SOCKET_FAMILY", "AF_INET6"}};
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)), "hsn0=fd00::10");
  n.health.interface_env = {{"NCCL_SOCKET_IFNAME", "^lo,hsn"}};
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)), "eth0=10.0.0.10");
  n.health.interface_env = {{"NCCL_SOCKET_IFNAME", "=hsn"}};
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)), "");  // picks nothing: the interface rule says so
  n.health.interface_env = {{"NCCL_SOCKET_IFNAME", "h"}};  // one character: NCCL reads it unset
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)), "-=10.0.0.10");

  // Gloo: exact names; one address picked by NCCL and Gloo is tested once.
  n.health.interface_env = {{"NCCL_SOCKET_IFNAME", "hsn0"}, {"GLOO_SOCKET_IFNAME", "hsn0,hsn1"}};
  variables.clear();
  EXPECT_EQ(Addresses(CollectiveEndpoints(n, &variables)), "hsn0=10.1.0.10 hsn1=10.2.0.10");
  EXPECT_EQ(variables, (std::vector<std::string>{"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}));
  n.health.interface_env = {{"HOROVOD_GLOO_IFACE", "hsn"}};
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)), "");
}

// A GPU node with NCCL_SOCKET_IFNAME unset: NCCL's own pick, as NCCL 2.2x makes it (ib* first;
// else all but docker*, lo*, virbr*; then docker*, lo, virbr*), link state not looked at.
TEST(PeerAddresses, NcclsOwnPickOnAGpuNodeWithTheVariableUnset) {
  NodeFacts n = Node("node0", "10.0.0.10");
  n.gpus.resize(8);
  n.health.interfaces.push_back(Interface("docker0", "down", {"172.17.0.1/16"}));
  n.health.interfaces.push_back(Interface("br-3f2a", "up", {"172.18.0.1/16"}));
  n.health.interfaces.push_back(Interface("virbr0", "down", {"192.168.122.1/24"}));
  EXPECT_EQ(NcclOwnPick(n), (std::vector<std::string>{"eth0", "br-3f2a"}));
  std::vector<std::string> variables;
  EXPECT_EQ(Addresses(CollectiveEndpoints(n, &variables)), "eth0=10.0.0.10 br-3f2a=172.18.0.1");
  EXPECT_EQ(variables, std::vector<std::string>{kNcclOwnPick});
  n.health.interfaces.push_back(Interface("ib0", "down", {"192.168.1.10/24"}));
  EXPECT_EQ(NcclOwnPick(n), std::vector<std::string>{"ib0"});
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)), "ib0=192.168.1.10(down)");
  // IPv6 only: ib0 has none, eth0 its link-local one, which NCCL counts (only ::1 it does not);
  // the test has no address there it could reach.
  n.health.interface_env = {{"NCCL_SOCKET_FAMILY", "AF_INET6"}};
  EXPECT_EQ(NcclOwnPick(n), std::vector<std::string>{"eth0"});
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)), "");
  n.health.interfaces = {Interface("lo", "unknown", {"127.0.0.1/8"})};
  n.health.interface_env.clear();
  EXPECT_EQ(NcclOwnPick(n), std::vector<std::string>{"lo"});
  n.gpus.clear();  // no GPU: no NCCL, the cluster file's address
  EXPECT_EQ(Addresses(CollectiveEndpoints(n)), "-=10.0.0.10");
}

// The probe's peers mode, for real: node0 and node1 on 127.0.0.1 and .2, a listener of another
// run (another token) on .4, nothing on .3 or .9, and a fifth process that finds node0's port
// taken. node1 and the other run's listener stay up for their 2 s of retries to .9 (a process
// ends once every node it expects has connected: node1 would otherwise end after node0's first
// connection, before the one that finds node1 where node0 was told node 3 is).
TEST(PeerProbe, ConnectsAnswersAndTellsWhoAnswered) {
  const std::string dir = testing::ScratchDirs::Make("peer-probe");
  std::ofstream(dir + "/probe.sh") << ProbeScript();
  const int port = test::FreePort();
  auto node = [&](const std::string& index, const std::string& token, const std::string& listen,
                  const std::string& targets, const std::string& out) {
    return "DTRAIN_PROBE_MODE=peers DTRAIN_PROBE_PEERS_PORT=" + std::to_string(port) +
           " DTRAIN_PROBE_PEERS_TOKEN=" + token + " DTRAIN_PROBE_PEERS_INDEX=" + index +
           " DTRAIN_PROBE_PEERS_WAIT_S=2 DTRAIN_PROBE_PEERS_LISTEN='" + listen +
           "' DTRAIN_PROBE_PEERS_TARGETS='" + targets + "' timeout 10 sh " + dir + "/probe.sh >" +
           dir + "/" + out + " 2>&1 & ";
  };
  const testing::ShellRun run = testing::RunShell(
      node("0", "t0k3n", "127.0.0.1", "1=127.0.0.2 2=127.0.0.3 3=127.0.0.2 4=127.0.0.4", "n0") +
      node("1", "t0k3n", "127.0.0.2", "0=127.0.0.1 9=127.0.0.9", "n1") +
      node("4", "other", "127.0.0.4", "9=127.0.0.9", "n4") + "sleep 0.5; " +
      node("5", "t0k3n", "127.0.0.1", "", "n5") + "wait");
  ASSERT_TRUE(run.status.error.empty()) << run.status.error;

  PeerRun peers;
  peers.port = port;
  ApplyPeerOutput(0, ReadText(dir + "/n0"), "", peers);
  ApplyPeerOutput(1, ReadText(dir + "/n1"), "", peers);
  ApplyPeerOutput(5, ReadText(dir + "/n5"), "", peers);
  std::map<std::string, PeerConnection> by;
  for (const PeerConnection& c : peers.connections) {
    by[std::to_string(c.from) + ">" + std::to_string(c.to)] = c;
  }
  ASSERT_EQ(by.size(), 6u) << ReadText(dir + "/n0") << ReadText(dir + "/n1");
  EXPECT_EQ(by["0>1"].result, "ok");
  EXPECT_EQ(by["1>0"].result, "ok");
  EXPECT_LT(by["0>1"].ms, 2000);
  EXPECT_EQ(by["0>2"].result, "refused");
  EXPECT_EQ(by["0>2"].detail, "Connection refused");
  EXPECT_GE(by["0>2"].ms, 1900);  // retried for the whole 2 s
  EXPECT_EQ(by["0>3"].result, "wrong-node");
  EXPECT_EQ(by["0>3"].detail, "1");
  EXPECT_EQ(by["0>4"].result, "no-answer");
  EXPECT_EQ(by["1>9"].result, "refused");
  EXPECT_EQ(peers.listen_errors[5], "127.0.0.1: Address already in use");
  EXPECT_EQ(peers.listen_errors[0], "");
  EXPECT_EQ(peers.not_tested[0], "");
}

TEST(PeerProbe, ANodeWhoseProcessFailedIsNotTested) {
  PeerRun run;
  ApplyPeerOutput(2, "peers_error=no python on this node to test connections with\n",
                  "it ended early (exit status 0)", run);
  EXPECT_EQ(run.not_tested[2], "no python on this node to test connections with");
  ApplyPeerOutput(3, "peers_listen=10.0.0.13;ok\npeer=0;10.0.0.10;ok;1.5;\n",
                  "no answer within 20 s (the test was stopped)", run);
  EXPECT_EQ(run.not_tested[3], "no answer within 20 s (the test was stopped)");
  ASSERT_EQ(run.connections.size(), 1u);
  EXPECT_EQ(run.connections[0].from, 3u);
  EXPECT_DOUBLE_EQ(run.connections[0].ms, 1.5);
}

// A run of the test over `nodes` with every connection's result from `result(from, to)`.
PeerRun Mesh(const std::vector<NodeFacts>& nodes,
             const std::function<std::string(size_t, size_t)>& result) {
  PeerRun run;
  run.ran = true;
  run.port = 40000;
  run.variables = {"NCCL_SOCKET_IFNAME"};
  for (size_t i = 0; i < nodes.size(); ++i) {
    run.endpoints.push_back({{"hsn0", "10.1.0." + std::to_string(10 + i)}});
  }
  run.not_tested.resize(nodes.size());
  run.listen_errors.resize(nodes.size());
  run.took_part.assign(nodes.size(), true);
  for (size_t a = 0; a < nodes.size(); ++a) {
    for (size_t b = 0; b < nodes.size(); ++b) {
      if (a == b) continue;
      PeerConnection c;
      c.from = a;
      c.to = b;
      c.address = run.endpoints[b][0].address;
      c.result = result(a, b);
      c.ms = c.result == "ok" ? 0.5 + a : 5000;
      c.detail = c.result == "ok" ? "" : "no answer within 5 s";
      run.connections.push_back(c);
    }
  }
  return run;
}

// `run` without the connections `drop` picks.
void DropConnections(PeerRun& run, const std::function<bool(const PeerConnection&)>& drop) {
  run.connections.erase(std::remove_if(run.connections.begin(), run.connections.end(), drop),
                        run.connections.end());
}

std::vector<NodeFacts> Nodes(int count) {
  std::vector<NodeFacts> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(Node("node" + std::to_string(i), "10.0.0." + std::to_string(10 + i)));
  }
  return out;
}

TEST(PeerVerdict, EveryPairConnectedIsOneOkLine) {
  const auto nodes = Nodes(3);
  const auto findings =
      CheckPeerConnections(Mesh(nodes, [](size_t, size_t) { return "ok"; }), nodes);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kOk);
  EXPECT_EQ(findings[0].message,
            "every node connects to every other over hsn0 (NCCL_SOCKET_IFNAME) (3 pair(s), the "
            "slowest connection in 2.5 ms)");
}

// A node the probe did not reach takes no part: the ok line speaks for the nodes tested.
TEST(PeerVerdict, TheOkLineSpeaksOnlyForTheNodesTested) {
  auto nodes = Nodes(3);
  nodes[2].reached = false;
  PeerRun run = Mesh(nodes, [](size_t, size_t) { return "ok"; });
  run.took_part[2] = false;
  DropConnections(run, [](const PeerConnection& c) { return c.from == 2 || c.to == 2; });
  const auto findings = CheckPeerConnections(run, nodes);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kOk);
  EXPECT_EQ(findings[0].message,
            "the 2 of 3 nodes tested connect to each other over hsn0 (NCCL_SOCKET_IFNAME) (1 "
            "pair(s), the slowest connection in 1.5 ms)");
}

TEST(PeerVerdict, ANodeCutOffIsNamedAloneAndTheOthersAreNot) {
  const auto nodes = Nodes(4);
  const PeerRun run =
      Mesh(nodes, [](size_t a, size_t b) { return a == 2 || b == 2 ? "timeout" : "ok"; });
  const auto findings = CheckPeerConnections(run, nodes);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kError);
  EXPECT_EQ(findings[0].nodes, std::vector<std::string>{"node2"});
  EXPECT_EQ(findings[0].message,
            "node node2 (10.1.0.12) cannot connect with any of the other 3 node(s) over hsn0 "
            "(NCCL_SOCKET_IFNAME), which connect with each other: node0 -> node2 10.1.0.12: "
            "timeout (no answer within 5 s); node2 -> node0 10.1.0.10: timeout (no answer within "
            "5 s); node1 -> node2 10.1.0.12: timeout (no answer within 5 s); and 3 more; NCCL's "
            "and Gloo's init would wait for it until their timeout");
}

TEST(PeerVerdict, APairNoNodeExplainsNamesBothAsDoesTheOnePairOfTwoNodes) {
  auto nodes = Nodes(3);
  // node0 and node1 cannot connect (one way is enough); each connects with node2.
  auto findings = CheckPeerConnections(
      Mesh(nodes, [](size_t a, size_t b) { return a == 1 && b == 0 ? "refused" : "ok"; }), nodes);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].nodes, (std::vector<std::string>{"node0", "node1"}));
  EXPECT_NE(findings[0].message.find("the nodes node0 and node1 cannot connect over hsn0 "
                                     "(NCCL_SOCKET_IFNAME): node1 -> node0 10.1.0.10: refused"),
            std::string::npos)
      << findings[0].message;

  nodes = Nodes(2);
  findings = CheckPeerConnections(Mesh(nodes, [](size_t, size_t) { return "unreachable"; }), nodes);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kError);
  EXPECT_EQ(findings[0].nodes, (std::vector<std::string>{"node0", "node1"}));
}

TEST(PeerVerdict, TwoNodesWithOneAddressAndAnotherNodeAnswering) {
  const auto nodes = Nodes(3);
  PeerRun run = Mesh(nodes, [](size_t, size_t b) { return b == 2 ? "wrong-node" : "ok"; });
  run.endpoints[2][0].address = "10.1.0.11";
  for (PeerConnection& c : run.connections) {
    if (c.to == 2) c.address = "10.1.0.11", c.detail = "1";
  }
  const auto findings = CheckPeerConnections(run, nodes);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].message,
            "nodes node1, node2 all have the address 10.1.0.11 on hsn0: the collectives' "
            "connections to one of them reach another, or the node itself");
  EXPECT_EQ(findings[0].nodes, (std::vector<std::string>{"node1", "node2"}));
  EXPECT_NE(findings[1].message.find("node0 -> node2 10.1.0.11: node1 answered there"),
            std::string::npos)
      << findings[1].message;
}

// NCCL's own pick on GPU nodes takes a container bridge every node has with one address (a
// Docker network's 172.18.0.1): named, with the variable's value that leaves it out, whether or
// not any connection was made (none here: what is shared is never connected to).
TEST(PeerVerdict, ABridgeEveryNodeHasAlikeInNcclsOwnPick) {
  const auto nodes = Nodes(3);
  PeerRun run;
  run.variables = {kNcclOwnPick};
  for (size_t i = 0; i < nodes.size(); ++i) {
    run.endpoints.push_back({{"eth0", nodes[i].address}, {"br-3f2a", "172.18.0.1"}});
  }
  const auto findings = CheckPeerConnections(run, nodes);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kError);
  EXPECT_EQ(findings[0].message,
            "nodes node0, node1, node2 all have the address 172.18.0.1 on br-3f2a, which NCCL "
            "picks with NCCL_SOCKET_IFNAME unset: the collectives' connections to one of them "
            "reach another, or the node itself");
  EXPECT_NE(findings[0].remedy.find("NCCL_SOCKET_IFNAME=^br-3f2a,docker,lo,virbr"),
            std::string::npos)
      << findings[0].remedy;
}

TEST(PeerVerdict, WhatCouldNotBeTestedIsAWarning) {
  const auto nodes = Nodes(3);
  PeerRun run = Mesh(nodes, [](size_t, size_t b) { return b == 1 ? "refused" : "ok"; });
  run.listen_errors[1] = "10.1.0.11: Address already in use";
  DropConnections(run, [](const PeerConnection& c) { return c.to == 1; });
  run.not_tested[2] = "no python on this node to test connections with";
  const auto findings = CheckPeerConnections(run, nodes);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].severity, Severity::kWarning);
  EXPECT_EQ(findings[0].message,
            "node node1: connections to it not tested: it could not listen on port 40000 "
            "(10.1.0.11: Address already in use)");
  EXPECT_EQ(findings[1].nodes, std::vector<std::string>{"node2"});
  EXPECT_EQ(CheckPeerConnections(PeerRun{}, nodes).size(), 0u);  // not run: nothing said
}

}  // namespace
}  // namespace dtrain
