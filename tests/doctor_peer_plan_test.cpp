// The peer test's plan (doctor/peer_plan.h): which nodes each node connects to, every pair before
// a start, a few partners per round in the health watch with every pair tested within a known
// number of rounds; the verdict on such a round; the probe's peers mode told how many nodes
// connect to it (DTRAIN_PROBE_PEERS_CALLERS), run for real on loopback addresses; the cluster
// file's DTRAIN_PROBE_PEERS_PARTNERS.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/peer_plan.h"
#include "doctor/peer_run.h"
#include "doctor/peer_verdict.h"
#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "support/free_port.h"
#include "support/scratch_dirs.h"
#include "support/shell_run.h"

namespace dtrain {

std::string_view ProbeScript();

namespace {

using Pairs = std::set<std::pair<size_t, size_t>>;

Pairs PairsOf(const std::vector<std::vector<size_t>>& targets) {
  Pairs pairs;
  for (size_t k = 0; k < targets.size(); ++k) {
    for (size_t t : targets[k]) pairs.insert(std::minmax(k, t));
  }
  return pairs;
}

TEST(PeerPlan, EveryPairAtOnceWithoutPartnersOrWhenTheyAreAsManyAsHalfTheRing) {
  for (size_t n : {2, 3, 7, 10}) {
    const auto targets = PeerTargets(n, {});
    EXPECT_EQ(PairsOf(targets).size(), n * (n - 1) / 2) << n;
    for (size_t k = 0; k < n; ++k) EXPECT_EQ(targets[k].size(), n - 1) << n;
    EXPECT_TRUE(PeerOffsets(n, {}).empty());
    EXPECT_EQ(RoundsToCoverAll(n, {}), 1u);
  }
  // Four partners reach offsets 1 to 4: all there are on 8 or 9 nodes.
  EXPECT_TRUE(PeerOffsets(8, {4, 0}).empty());
  EXPECT_TRUE(PeerOffsets(9, {4, 5}).empty());
  EXPECT_EQ(PeerTargets(9, {4, 5})[0].size(), 8u);
  EXPECT_EQ(PeerOffsets(10, {4, 0}), (std::vector<size_t>{1, 2, 3, 4}));
}

TEST(PeerPlan, APartnerPlanTestsEveryPairWithinItsRoundsFromAnyRound) {
  for (size_t n : {6, 10, 11, 16, 33, 256}) {
    for (size_t partners : {2, 3, 4}) {
      const size_t rounds = RoundsToCoverAll(n, {partners, 0});
      if (partners >= n / 2) {
        EXPECT_EQ(rounds, 1u);
        continue;
      }
      // Offsets 2 to n / 2, partners - 1 of them a round.
      EXPECT_EQ(rounds, (n / 2 - 1 + partners - 2) / (partners - 1)) << n << " " << partners;
      for (uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{1} << 40}) {
        Pairs seen;
        for (uint64_t r = first; r < first + rounds; ++r) {
          const auto targets = PeerTargets(n, {partners, r});
          for (size_t k = 0; k < n; ++k) {
            // partners connections, to distinct others, the next in the ring among them.
            ASSERT_EQ(targets[k].size(), partners) << n << " " << partners << " " << r;
            EXPECT_EQ(std::set<size_t>(targets[k].begin(), targets[k].end()).size(), partners);
            EXPECT_EQ(std::count(targets[k].begin(), targets[k].end(), k), 0);
            EXPECT_EQ(std::count(targets[k].begin(), targets[k].end(), (k + 1) % n), 1);
          }
          const Pairs round = PairsOf(targets);
          seen.insert(round.begin(), round.end());
        }
        EXPECT_EQ(seen.size(), n * (n - 1) / 2)
            << n << " nodes, " << partners << " partners, from round " << first;
        // One round fewer leaves pairs out (the plan is no larger than it needs to be).
        if (rounds > 1) {
          Pairs fewer;
          for (uint64_t r = first; r + 1 < first + rounds; ++r) {
            const Pairs round = PairsOf(PeerTargets(n, {partners, r}));
            fewer.insert(round.begin(), round.end());
          }
          EXPECT_LT(fewer.size(), n * (n - 1) / 2);
        }
      }
    }
  }
  // 256 nodes, four partners: 1,024 connections a round instead of 65,280; every pair in 43.
  const auto targets = PeerTargets(256, {4, 0});
  size_t connections = 0;
  for (const auto& t : targets) connections += t.size();
  EXPECT_EQ(connections, 1024u);
  EXPECT_EQ(RoundsToCoverAll(256, {4, 0}), 43u);
  EXPECT_EQ(PeerOffsets(256, {4, 0}), (std::vector<size_t>{1, 2, 3, 4}));
  EXPECT_EQ(PeerOffsets(256, {4, 1}), (std::vector<size_t>{1, 5, 6, 7}));
}

TEST(PeerPlan, EachNodeHasTwoPartnersOrMoreSoACutOffNodeIsToldFromItsPartners) {
  for (size_t n : {3, 4, 6, 12}) {
    for (uint64_t r = 0; r < 8; ++r) {
      const auto targets = PeerTargets(n, {2, r});
      std::vector<std::set<size_t>> partners(n);
      for (size_t k = 0; k < n; ++k) {
        for (size_t t : targets[k]) partners[k].insert(t), partners[t].insert(k);
      }
      for (size_t k = 0; k < n; ++k) EXPECT_GE(partners[k].size(), 2u) << n << " " << r;
    }
  }
}

TEST(PeerPlan, TheWatchTakesFourPartnersUnlessTheClusterFileSaysAndTheDoctorEveryPair) {
  ClusterSpec spec;
  EXPECT_EQ(WatchPeerPlan(spec, 3).partners, kWatchPeerPartners);
  EXPECT_EQ(WatchPeerPlan(spec, 3).round, 3u);
  EXPECT_EQ(DoctorPeerPlan(spec, 3).partners, 0u);
  spec.env[kPeerPartnersVariable] = "2";
  EXPECT_EQ(WatchPeerPlan(spec, 0).partners, 2u);
  EXPECT_EQ(DoctorPeerPlan(spec, 0).partners, 2u);
  spec.env[kPeerPartnersVariable] = "1";  // refused by the file's reader; ignored here
  EXPECT_EQ(WatchPeerPlan(spec, 0).partners, kWatchPeerPartners);
}

TEST(PeerPlan, TheClusterFilesValueIsAWholeNumberOfTwoOrMore) {
  const std::string nodes = "nodes: [{host: a}, {host: b}]\n";
  EXPECT_EQ(ParseClusterText(nodes + "env: {DTRAIN_PROBE_PEERS_PARTNERS: 3}\n", "c.yaml")
                .env.at(kPeerPartnersVariable),
            "3");
  for (const char* bad : {"1", "0", "two", "-3", "2.5", "\"\""}) {
    try {
      ParseClusterText(nodes + "env: {DTRAIN_PROBE_PEERS_PARTNERS: " + bad + "}\n", "c.yaml");
      ADD_FAILURE() << bad << " was taken";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("c.yaml:2"), std::string::npos) << what;
      EXPECT_NE(what.find("env.DTRAIN_PROBE_PEERS_PARTNERS: "), std::string::npos) << what;
      EXPECT_NE(what.find("expected a whole number, 2 or more"), std::string::npos) << what;
    }
  }
}

NodeFacts Node(size_t i) {
  NodeFacts n;
  n.host = "node" + std::to_string(i);
  n.address = "10.0.0." + std::to_string(10 + i);
  n.reached = true;
  return n;
}

// A round of the plan over `count` nodes where node `cut` connects with nobody.
PeerRun Round(size_t count, const PeerPlan& plan, size_t cut, std::vector<NodeFacts>& nodes) {
  PeerRun run;
  run.ran = true;
  run.port = 40000;
  run.variables = {"NCCL_SOCKET_IFNAME"};
  run.offsets = PeerOffsets(count, plan);
  run.rounds_to_cover = RoundsToCoverAll(count, plan);
  const auto targets = PeerTargets(count, plan);
  for (size_t i = 0; i < count; ++i) {
    nodes.push_back(Node(i));
    run.endpoints.push_back({{"hsn0", "10.1.0." + std::to_string(10 + i)}});
  }
  run.not_tested.resize(count);
  run.listen_errors.resize(count);
  run.took_part.assign(count, true);
  for (size_t a = 0; a < count; ++a) {
    for (size_t b : targets[a]) {
      PeerConnection c;
      c.from = a;
      c.to = b;
      c.address = run.endpoints[b][0].address;
      c.result = a == cut || b == cut ? "timeout" : "ok";
      c.ms = c.result == "ok" ? 1.5 : 5000;
      c.detail = c.result == "ok" ? "" : "no answer within 5 s";
      run.connections.push_back(c);
    }
  }
  return run;
}

TEST(PeerPlan, TheVerdictOfAPartnerRoundSaysWhatWasTested) {
  std::vector<NodeFacts> nodes;
  auto findings = CheckPeerConnections(Round(12, {3, 1}, 12, nodes), nodes);
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].severity, Severity::kOk);
  EXPECT_EQ(
      findings[0].message,
      "every node connects to the nodes it was tested with over hsn0 (NCCL_SOCKET_IFNAME) "
      "(36 pair(s), the nodes 1, 4, 5 apart in the ring; every pair in 3 run(s) of the test; the "
      "slowest connection in 1.5 ms)");

  nodes.clear();
  findings = CheckPeerConnections(Round(12, {3, 1}, 7, nodes), nodes);
  ASSERT_EQ(findings.size(), 1u) << findings[1].message;
  EXPECT_EQ(findings[0].severity, Severity::kError);
  EXPECT_EQ(findings[0].nodes, std::vector<std::string>{"node7"});
  EXPECT_EQ(findings[0].message.rfind("node node7 (10.1.0.17) cannot connect with any of the 6 "
                                      "node(s) it was tested with over hsn0 (NCCL_SOCKET_IFNAME), "
                                      "which connect with others: ",
                                      0),
            0u)
      << findings[0].message;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Three real processes of the probe's peers mode on loopback addresses, where the pairs are not
// tested both ways: node0 connects to node1 and node2, node1 to node2, node2 to none. Each is told
// how many nodes connect to it (DTRAIN_PROBE_PEERS_CALLERS: 0, 1, 2) and is done once they have:
// node2 stays until both called (without the count it would take its own empty target list for
// "nobody calls" and leave at once, refusing them), node0 leaves without waiting for calls that
// never come (it would wait out the 8 s of retries and a second for node1 and node2).
TEST(PeerPlan, TheProbeEndsOnceItsCallersHaveConnected) {
  const std::string dir = testing::ScratchDirs::Make("peer-plan-probe");
  std::ofstream(dir + "/probe.sh") << ProbeScript();
  const int port = test::FreePort();
  auto node = [&](int index, const std::string& targets, int callers) {
    return "DTRAIN_PROBE_MODE=peers DTRAIN_PROBE_PEERS_PORT=" + std::to_string(port) +
           " DTRAIN_PROBE_PEERS_TOKEN=p1an DTRAIN_PROBE_PEERS_INDEX=" + std::to_string(index) +
           " DTRAIN_PROBE_PEERS_WAIT_S=8 DTRAIN_PROBE_PEERS_LISTEN=127.0.0." +
           std::to_string(index + 1) + " DTRAIN_PROBE_PEERS_TARGETS='" + targets +
           "' DTRAIN_PROBE_PEERS_CALLERS=" + std::to_string(callers) + " timeout 20 sh " + dir +
           "/probe.sh >" + dir + "/n" + std::to_string(index) + " 2>&1 & ";
  };
  const auto start = std::chrono::steady_clock::now();
  // node2 starts last, so that the others' first attempts find nobody and are retried.
  const testing::ShellRun run =
      testing::RunShell(node(0, "1=127.0.0.2 2=127.0.0.3", 0) + node(1, "2=127.0.0.3", 1) +
                        "sleep 0.3; " + node(2, "", 2) + "wait");
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(run.status.error.empty()) << run.status.error;
  PeerRun peers;
  for (size_t i = 0; i < 3; ++i) {
    ApplyPeerOutput(i, ReadText(dir + "/n" + std::to_string(i)), "", peers);
    EXPECT_EQ(peers.listen_errors[i], "") << i;
  }
  ASSERT_EQ(peers.connections.size(), 3u) << ReadText(dir + "/n0");
  for (const PeerConnection& c : peers.connections) {
    EXPECT_EQ(c.result, "ok") << c.from << " -> " << c.to << ": " << c.detail;
  }
  // Done when called, not after the 8 s of retries and the second after them.
  EXPECT_LT(took_s, 6) << "a process waited for callers that were never coming";
}

}  // namespace
}  // namespace dtrain
