// Runs the probe script on every node at once through the cluster's Transport, with a
// rendezvous listener on the first node, and turns what comes back into NodeFacts.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "doctor/node_facts.h"
#include "doctor/peer_run.h"
#include "launcher/cluster_spec.h"
#include "launcher/transport.h"

namespace dtrain {

struct ProbeOptions {
  double timeout_s = 30;   // a node whose probe has not ended by then is reported, not waited for
  std::string workdir;     // the job's workdir as the nodes see it (spec.workdir or launch dir)
  std::string clip_dir;    // where dtrain-clip sits beside this dtrain, a hint for the probe
  std::string log_dir;     // where ranks write (the cluster file's log_dir, absolute)
  bool rendezvous = true;  // run the rendezvous connection test
  std::string skip;        // DTRAIN_PROBE_SKIP for the probe (parts to leave out)
  // Asked between polls; true ends the run at once, every probe killed and each node not yet
  // through reported as not ended (the health watch of a job that is ending).
  std::function<bool()> cancelled;
  // Slurm: the probes' step shares the CPUs other steps hold (--overlap), as the health watch
  // needs while the ranks run.
  bool beside_ranks = false;
  // Run the cluster file's health checks of `severity: warning` too (the doctor); the launch's
  // checks run only those that make a node unfit.
  bool warning_checks = true;
};

// The cluster file's health checks a probe with `options` runs: indices into
// spec.health_checks.
std::vector<size_t> HealthChecksRun(const ClusterSpec& spec, const ProbeOptions& options);

// The other end of the rendezvous test, started on the first node.
struct ListenerResult {
  bool started = false;  // the listener said it was listening
  std::string error;     // why not: port in use, no python, node unreachable
};

// One probe run over the cluster: per-node facts in ClusterSpec::nodes order.
struct ProbeRun {
  std::vector<NodeFacts> nodes;
  ListenerResult listener;
  std::string master_addr;
  int master_port = 0;
  double wall_s = 0;  // the probes; the doctor adds the peer test's
  // The peer connection test, run after the probes by the doctor and the launch's checks before
  // a start or restart (ran = false where it was not).
  PeerRun peers;
};

// Never throws for a node that fails: its NodeFacts says why (reached = false). The time limit
// is at least the slowest health check's and 5 s.
ProbeRun RunProbes(const ClusterSpec& spec, Transport& transport, const ProbeOptions& options);

// The probe's environment for one node: cluster env, node env, then the probe's own variables.
std::map<std::string, std::string> ProbeEnvironment(const ClusterSpec& spec, size_t node_index,
                                                    const ProbeOptions& options);

}  // namespace dtrain
