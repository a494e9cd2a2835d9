// What a node's probe printed: facts for the doctor's rules and both reports (text and --json),
// its link error counters judged as two readings, and the same bytes read as the peer test's
// output (with the addresses the facts' interfaces give), whatever a broken node sends back.
#include <cstddef>
#include <cstdint>
#include <string>

#include "doctor/checks.h"
#include "doctor/link_errors.h"
#include "doctor/node_facts.h"
#include "doctor/peer_run.h"
#include "doctor/peer_verdict.h"
#include "doctor/probe_runner.h"
#include "doctor/report.h"
#include "launcher/cluster_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  dtrain::ClusterSpec spec;
  spec.source = "fuzz.yaml";
  dtrain::ProbeRun run;
  for (int i = 0; i < 2; ++i) {
    dtrain::NodeSpec node;
    node.host = i == 0 ? "a" : "b";
    node.address = node.host;
    spec.nodes.push_back(node);
    dtrain::NodeFacts facts;
    facts.host = node.host;
    facts.address = node.address;
    facts.reached = true;
    // Node b sees the same output cut in half: nodes that differ exercise the comparisons.
    const std::string mine = i == 0 ? text : text.substr(0, text.size() / 2);
    dtrain::ApplyProbeLines(dtrain::SplitProbeOutput(mine), 1.7e9, facts);
    run.nodes.push_back(facts);
  }
  run.peers.ran = true;
  for (const dtrain::NodeFacts& facts : run.nodes) {
    run.peers.endpoints.push_back(dtrain::CollectiveEndpoints(facts, &run.peers.variables));
  }
  dtrain::ApplyPeerOutput(0, text, "", run.peers);
  dtrain::ApplyPeerOutput(1, text.substr(0, text.size() / 2), "it ended early", run.peers);
  std::vector<dtrain::Finding> findings = dtrain::CheckCluster(spec, run);
  dtrain::RenderTextReport(spec, run, findings, false);
  dtrain::AddPeerConnectionsJson(dtrain::RenderJsonReport(spec, run, findings), run.peers,
                                 run.nodes);
  // Node b's counters read as a first reading, node a's as the next one 1.5 s later.
  dtrain::LinkErrorWatch links;
  links.Update("n", dtrain::LinkCounters(run.nodes[1].health), 0);
  links.Update("n", dtrain::LinkCounters(run.nodes[0].health), 1.5);
  return 0;
}
