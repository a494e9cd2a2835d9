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
// those no rule below reads.
constexpr const char* kRestartCheckSkips = "python torch horovod py_spy clip rdzv nccl_lib pci";

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

NodeHealthFindings FastHealthCheck(const ClusterSpec& spec, double timeout_s, bool count_unreached,
                                   const std::function<bool()>& cancelled, LinkErrorWatch* links) {
  ProbeRun run = ProbeHealthParts(spec, timeout_s, cancelled);
  if (cancelled && cancelled()) return {};  // cut short: nothing to judge
  if (count_unreached) {  // before a start or restart: the nodes about to run connect?
    PeerOptions peers;
    peers.cancelled = cancelled;
    run.peers = RunPeerConnections(spec, run.nodes, peers);
    if (cancelled && cancelled()) return {};
  }

  // The rules about a node's own fitness; those comparing nodes or versions are the doctor's.
  std::vector<Finding> findings;
  if (count_unreached) findings = CheckReach(run.nodes, spec.ssh.port);
  for (auto rule : {CheckNvidiaSmiAnswers, CheckGpuCount, CheckGpuHealth, CheckNvlink,
                    CheckKernelLog, CheckInfiniband, CheckFreeSpace, CheckInterfaces}) {
    for (Finding& f : rule(run.nodes)) findings.push_back(std::move(f));
  }
  for (Finding& f : CheckSiteHealthChecks(spec, run.nodes, /*warning_checks=*/false))
    findings.push_back(std::move(f));
  for (Finding& f : CheckPeerConnections(run.peers, run.nodes)) findings.push_back(std::move(f));
  NodeHealthFindings found(ErrorsByNode(findings));
  if (links) {
    for (const Finding& f : links->Update(run.nodes)) found.warnings[f.nodes.front()] = f.message;
  }
  return found;
}

}  // namespace dtrain
