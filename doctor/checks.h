// The doctor's rules: each looks at every node's facts (and the cluster file) and returns
// findings. A finding names its severity, the nodes concerned, what is wrong and what to do.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "doctor/node_facts.h"
#include "doctor/probe_runner.h"
#include "launcher/cluster_spec.h"

namespace dtrain {

enum class Severity { kOk, kWarning, kError };
const char* SeverityName(Severity severity);  // "ok", "warning", "error"

struct Finding {
  Severity severity = Severity::kOk;
  std::string check;               // "reach", "cuda", "nccl", "driver", "rendezvous", ...
  std::string fact;                // the report column it concerns ("" when none)
  std::vector<std::string> nodes;  // the nodes concerned (the odd ones out for consistency)
  std::string message;             // "node gpu-c has NCCL 2.18.5, others 2.21.5"
  std::string remedy;              // one line of what to do; "" for ok findings
};

// Every rule over one probe run, in report order.
std::vector<Finding> CheckCluster(const ClusterSpec& spec, const ProbeRun& run);

// The rules one by one (each skips nodes that were not reached).
std::vector<Finding> CheckReach(const std::vector<NodeFacts>& nodes, int ssh_port = 22);
std::vector<Finding> CheckConsistency(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckTorchNccl(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckPins(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckDriverForCuda(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckGpus(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckWorkdir(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckPythonErrors(const ClusterSpec& spec,
                                       const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckClip(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckRendezvous(const ProbeRun& run);
std::vector<Finding> CheckClockSkew(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckLimits(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckPySpy(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes);

// Health: whether a node is fit to run a job, not only like the others (gpu_health_checks.cpp,
// kernel_log_checks.cpp, memory_error_checks.cpp, infiniband_checks.cpp, pci_checks.cpp,
// host_health_checks.cpp, shared_memory_checks.cpp, interface_checks.cpp,
// site_health_checks.cpp).
std::vector<Finding> CheckNvidiaSmiAnswers(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckGpuCount(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckGpuHealth(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckNvlink(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckKernelLog(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckMemoryErrors(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckInfiniband(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckMemlock(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckPciPaths(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckFreeSpace(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckDiskWrites(const std::vector<NodeFacts>& nodes);
// Files in /dev/shm no process holds (shared_memory_checks.cpp): an error where the libraries'
// segments among them take 64 MiB or more and under 512 MiB is free, else a warning where files of
// any name take 1 GiB or a quarter of it.
std::vector<Finding> CheckSharedMemoryLeftovers(const std::vector<NodeFacts>& nodes);
// A test write not ended in time (DTRAIN_PROBE_WRITE_TIMEOUT): an error on a node whose write
// in a place hung while other nodes wrote there in time (its own drive or mount hangs), else one
// warning naming every node whose write there hung (a node alone, or shared storage swamped or
// hanging for all). It compares nodes, so it is the doctor's; a launch takes it as warnings
// (WriteHangWarnings, fast_health_check.h).
std::vector<Finding> CheckWriteHangs(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckSwap(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckMemory(const std::vector<NodeFacts>& nodes);
std::vector<Finding> CheckClocksource(const std::vector<NodeFacts>& nodes);
// A node whose neighbour (ARP/NDISC) table is full now (an error: a peer it has not talked to
// lately cannot be resolved, and connecting to it times out) or was full since boot (a warning)
// (neighbour_table_checks.cpp).
std::vector<Finding> CheckNeighbourTables(const std::vector<NodeFacts>& nodes);
// The interfaces NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME and HOROVOD_GLOO_IFACE name, missing or
// down on a node (errors), and an NCCL_IB_HCA that matches none of its InfiniBand ports (a
// warning), as NCCL and Gloo match them (interface_checks.cpp).
std::vector<Finding> CheckInterfaces(const std::vector<NodeFacts>& nodes);
// The cluster file's own health checks (site_health_checks.cpp): each one a node failed, timed
// out on or gave no answer to, at the check's severity; `warning_checks` false: those of
// `severity: warning` were not run and are not judged.
std::vector<Finding> CheckSiteHealthChecks(const ClusterSpec& spec,
                                           const std::vector<NodeFacts>& nodes,
                                           bool warning_checks = true);

// SSH nodes that a job in `log_dir` (the cluster file's log_dir) quarantined within a day, as
// warnings: they may pass every check now and fail the next run (quarantine_history_checks.cpp).
std::vector<Finding> CheckRecentQuarantines(const ClusterSpec& spec, const std::string& log_dir,
                                            int64_t now_us);

// True when the job's command is a Python interpreter or a Python launcher (torchrun, ...), or
// the cluster file names `python:`.
bool JobUsesPython(const ClusterSpec& spec);
// True when the cluster file asks for GPUs: a node lists `gpus`, or `expect` pins cuda/driver.
bool GpusExpected(const ClusterSpec& spec);
// The highest severity among the findings (kOk when empty).
Severity WorstSeverity(const std::vector<Finding>& findings);
// Each node an error finding names -> those findings' messages, "; "-joined, on one line: why
// `--exclude-bad` leaves it out and why a restart quarantines it.
std::map<std::string, std::string> ErrorsByNode(const std::vector<Finding>& findings);

}  // namespace dtrain
