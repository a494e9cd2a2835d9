// FastHealthCheck: probe (health parts only) -> the doctor's health rules -> unfit nodes.
#include "doctor/fast_health_check.h"

#include <chrono>
#include <optional>

#include "doctor/checks.h"
#include "doctor/doctor_run.h"
#include "doctor/probe_runner.h"
#include "launcher/transport.h"

namespace dtrain {

namespace {

// The parts of the node probe the fast check leaves out (templates/probe.sh DTRAIN_PROBE_SKIP):
// those no rule below reads.
constexpr const char* kRestartCheckSkips = "python torch horovod py_spy clip rdzv nccl_lib pci";

}  // namespace

NodeHealthFindings FastHealthCheck(const ClusterSpec& spec, double timeout_s,
                                   bool count_unreached, const std::function<bool()>& cancelled,
                                   LinkErrorWatch* links) {
  ProbeOptions options = DefaultProbeOptions(spec, timeout_s);
  options.rendezvous = false;  // the job's own rendezvous port may still be in TIME_WAIT
  options.skip = kRestartCheckSkips;
  options.cancelled = cancelled;
  options.beside_ranks = true;  // the health watch runs beside the ranks' step
  std::unique_ptr<Transport> transport = MakeTransport(spec);
  const ProbeRun run = RunProbes(spec, *transport, options);
  if (cancelled && cancelled()) return {};  // cut short: nothing to judge

  // The rules about a node's own fitness; those comparing nodes or versions are the doctor's.
  std::vector<Finding> findings;
  if (count_unreached) findings = CheckReach(run.nodes, spec.ssh.port);
  for (auto rule : {CheckNvidiaSmiAnswers, CheckGpuCount, CheckGpuHealth, CheckNvlink,
                    CheckKernelLog, CheckInfiniband, CheckFreeSpace}) {
    for (Finding& f : rule(run.nodes)) findings.push_back(std::move(f));
  }
  NodeHealthFindings found(ErrorsByNode(findings));
  if (links) {
    const double now_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    for (const NodeFacts& node : run.nodes) {
      if (!node.reached) continue;
      if (std::optional<Finding> f = links->Update(node.host, LinkCounters(node.health), now_s)) {
        found.warnings[node.host] = f->message;
      }
    }
  }
  return found;
}

}  // namespace dtrain
