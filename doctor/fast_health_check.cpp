// FastHealthCheck: probe (health parts only) -> the doctor's health rules -> unfit nodes.
#include "doctor/fast_health_check.h"

#include "doctor/checks.h"
#include "doctor/doctor_run.h"
#include "doctor/peer_verdict.h"
#include "doctor/probe_runner.h"
#include "launcher/transport.h"

namespace dtrain {

namespace {

// The parts of the node probe the fast check leaves out (templates/probe.sh DTRAIN_PROBE_SKIP):
// those no rule below reads, and /dev/shm's files where it has room (shm-leftovers is an error
// only where it has not; the listing reads every process's maps, each round of the watch).
constexpr const char* kRestartCheckSkips =
    "python torch horovod py_spy clip rdzv nccl_lib pci shm_files";

// Whether an error names a pair of nodes (or more) where one node alone may be at fault (of the
// fitness rules, only the peer test names several nodes).
bool NamesPairs(const std::vector<Finding>& findings) {
  for (const Finding& f : findings) {
    if (f.severity == Severity::kError && f.nodes.size() > 1) return true;
  }
  return false;
}

}  // namespace

ProbeRun ProbeHealthParts(const ClusterSpec& spec, double timeout_s,
                          const std::function<bool()>& cancelled) {
  ProbeOptions options = DefaultProbeOptions(spec, timeout_s);
  options.rendezvous = false;  // the job's own rendezvous port may still be in TIME_WAIT
  options.skip = kRestartCheckSkips;
  options.cancelled = cancelled;
  options.beside_ranks = true;     // the health watch runs beside the ranks' step
  options.warning_checks = false;  // the cluster file's checks that only warn are the doctor's
  std::unique_ptr<Transport> transport = MakeTransport(spec);
  return RunProbes(spec, *transport, options);
}

std::vector<Finding> NodeFitnessFindings(const ClusterSpec& spec, const ProbeRun& run,
                                         bool count_unreached) {
  // The rules about a node's own fitness; those comparing nodes or versions are the doctor's.
  std::vector<Finding> findings;
  if (count_unreached) findings = CheckReach(run.nodes, spec.ssh.port);
  for (auto rule :
       {CheckNvidiaSmiAnswers, CheckGpuCount, CheckGpuHealth, CheckNvlink, CheckKernelLog,
        CheckMemoryErrors, CheckInfiniband, CheckFreeSpace, CheckDiskWrites,
        CheckSharedMemoryLeftovers, CheckInterfaces, CheckNeighbourTables}) {
    for (Finding& f : rule(run.nodes)) findings.push_back(std::move(f));
  }
  for (Finding& f : CheckSiteHealthChecks(spec, run.nodes, /*warning_checks=*/false))
    findings.push_back(std::move(f));
  for (Finding& f : CheckPeerConnections(run.peers, run.nodes)) findings.push_back(std::move(f));
  return findings;
}

std::multimap<std::string, std::string> WriteHangWarnings(const std::vector<NodeFacts>& nodes) {
  std::multimap<std::string, std::string> out;
  for (const Finding& f : CheckWriteHangs(nodes)) {
    out.emplace(f.severity == Severity::kError ? f.nodes.front() : "", f.message);
  }
  return out;
}

NodeHealthFindings FastHealthCheck(const ClusterSpec& spec, double timeout_s, bool count_unreached,
                                   const std::function<bool()>& cancelled, LinkErrorWatch* links,
                                   const PeerPlan& peer_plan) {
  ProbeRun run = ProbeHealthParts(spec, timeout_s, cancelled);
  if (cancelled && cancelled()) return {};  // cut short: nothing to judge
  // Whether the nodes connect with each other where the job's collectives do (a link up but in
  // the wrong VLAN; during a run, one that stopped carrying traffic with its carrier up).
  PeerOptions peers;
  peers.cancelled = cancelled;
  peers.beside_ranks = true;
  peers.plan = peer_plan;  // a test that named pairs runs once more on the same pairs
  run.peers = RunPeerConnections(spec, run.nodes, peers);
  std::vector<Finding> findings = NodeFitnessFindings(spec, run, count_unreached);
  // A link that failed while the test ran leaves some of its node's pairs connected and others
  // not, and the test names pairs instead of the node: once more, on what is now the case. The
  // probe too: a node whose link went down during the test is then unfit in its own right (and
  // out of the second test) instead of one of a pair that every rank stops for.
  if (NamesPairs(findings) && !(cancelled && cancelled())) {
    run = ProbeHealthParts(spec, timeout_s, cancelled);
    if (cancelled && cancelled()) return {};
    run.peers = RunPeerConnections(spec, run.nodes, peers);
    findings = NodeFitnessFindings(spec, run, count_unreached);
  }
  if (cancelled && cancelled()) return {};

  NodeHealthFindings found(ErrorsByNode(findings));
  if (links) {
    for (const Finding& f : links->Update(run.nodes))
      found.warnings.emplace(f.nodes.front(), f.message);
  }
  for (auto& [host, what] : WriteHangWarnings(run.nodes)) found.warnings.emplace(host, what);
  // A witness (NodeSpec::witness) only took part in the peer test.
  for (const NodeSpec& node : spec.nodes) {
    if (!node.witness) continue;
    found.unfit.erase(node.host);
    found.warnings.erase(node.host);
  }
  return found;
}

}  // namespace dtrain
