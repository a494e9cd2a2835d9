// What the doctor's rules share: severities, what the cluster file asks for (Python, GPUs), and
// CheckCluster, which runs every rule in report order. The rules themselves are in
// version_checks.cpp, connection_checks.cpp, peer_verdict.cpp, node_checks.cpp and, for health,
// gpu_health_checks.cpp, kernel_log_checks.cpp, infiniband_checks.cpp, pci_checks.cpp,
// host_health_checks.cpp, interface_checks.cpp and site_health_checks.cpp.
#include "doctor/checks.h"

#include <algorithm>

#include "doctor/check_support.h"
#include "doctor/peer_verdict.h"

namespace dtrain {

using checks::JobProgram;

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kOk:
      return "ok";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "error";
}

Severity WorstSeverity(const std::vector<Finding>& findings) {
  Severity worst = Severity::kOk;
  for (const auto& f : findings) worst = std::max(worst, f.severity);
  return worst;
}

std::map<std::string, std::string> ErrorsByNode(const std::vector<Finding>& findings) {
  std::map<std::string, std::string> why;
  for (const Finding& f : findings) {
    if (f.severity != Severity::kError) continue;
    for (const std::string& host : f.nodes) {
      std::string& reasons = why[host];
      reasons += (reasons.empty() ? "" : "; ") + f.message;
    }
  }
  for (auto& [host, reasons] : why) {
    for (char& c : reasons) c = c == '\n' ? ' ' : c;
  }
  return why;
}

bool JobUsesPython(const ClusterSpec& spec) {
  if (!spec.python.empty()) return true;
  const std::string program = JobProgram(spec);
  if (program.rfind("python", 0) == 0) return true;
  for (const char* launcher : {"torchrun", "horovodrun", "accelerate", "deepspeed"}) {
    if (program == launcher) return true;
  }
  return false;
}

bool GpusExpected(const ClusterSpec& spec) {
  if (spec.expect.count("cuda") || spec.expect.count("driver")) return true;
  return std::any_of(spec.nodes.begin(), spec.nodes.end(),
                     [](const NodeSpec& n) { return !n.gpus.empty(); });
}

std::vector<Finding> CheckCluster(const ClusterSpec& spec, const ProbeRun& run) {
  std::vector<Finding> all;
  auto add = [&all](std::vector<Finding> more) {
    for (auto& f : more) all.push_back(std::move(f));
  };
  add(CheckReach(run.nodes, spec.ssh.port));
  add(CheckConsistency(run.nodes));
  add(CheckTorchNccl(run.nodes));
  add(CheckPins(spec, run.nodes));
  add(CheckDriverForCuda(run.nodes));
  add(CheckGpus(spec, run.nodes));
  add(CheckWorkdir(run.nodes));
  add(CheckPythonErrors(spec, run.nodes));
  add(CheckClip(spec, run.nodes));
  add(CheckRendezvous(run));
  add(CheckPeerConnections(run.peers, run.nodes));
  add(CheckClockSkew(run.nodes));
  add(CheckLimits(run.nodes));
  add(CheckPySpy(spec, run.nodes));
  add(CheckNvidiaSmiAnswers(run.nodes));
  add(CheckGpuCount(run.nodes));
  add(CheckGpuHealth(run.nodes));
  add(CheckNvlink(run.nodes));
  add(CheckKernelLog(run.nodes));
  add(CheckMemoryErrors(run.nodes));
  add(CheckInfiniband(run.nodes));
  add(CheckMemlock(run.nodes));
  add(CheckPciPaths(run.nodes));
  add(CheckFreeSpace(run.nodes));
  add(CheckDiskWrites(run.nodes));
  add(CheckSharedMemoryLeftovers(run.nodes));
  add(CheckWriteHangs(run.nodes));
  add(CheckSwap(run.nodes));
  add(CheckMemory(run.nodes));
  add(CheckClocksource(run.nodes));
  add(CheckNeighbourTables(run.nodes));
  add(CheckInterfaces(run.nodes));
  add(CheckSiteHealthChecks(spec, run.nodes));
  return all;
}

}  // namespace dtrain
