// NodeFacts: what the probe found on one node, parsed (versions as Version, sizes as numbers),
// plus how reaching the node went. Built from the probe's `key=value` lines by ParseProbeOutput.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "doctor/node_health.h"
#include "doctor/reach_failure.h"
#include "doctor/tool_versions.h"
#include "doctor/version.h"

namespace dtrain {

struct NodeFacts {
  std::string host;     // NodeSpec::host
  std::string address;  // NodeSpec::address
  int slots = 1;
  std::vector<int> listed_gpus;

  // Reaching the node and running the probe.
  bool reached = false;  // the probe ran to its end
  ReachFailure failure = ReachFailure::kNone;
  std::string error;         // why not: transport error, exit status, timeout
  double probe_seconds = 0;  // from start to exit, as the doctor saw it

  // System.
  std::string hostname, os, kernel, workdir;
  int cpus = 0;
  long long mem_kib = 0, shm_kib = 0, disk_free_kib = 0;
  bool workdir_exists = false;
  long long nofile = 0;        // ulimit -n; -1 for unlimited
  long long memlock_kib = -2;  // ulimit -l (KiB); -1 for unlimited, -2 when the probe did not say
  double clock_offset_s = 0;   // node clock minus the doctor's clock when the line arrived
  bool clock_known = false;

  // GPUs and driver.
  std::vector<GpuInfo> gpus;  // nvidia-smi's list, else the driver's (/proc/driver/nvidia/gpus)
  bool gpus_from_proc = false;
  Version driver;  // from nvidia-smi, else /proc/driver/nvidia/version
  bool driver_open_module = false;
  std::string nvidia_smi_error;

  // CUDA toolkit and NCCL.
  std::string cuda_home;
  Version cuda;  // version.json, else version.txt, else nvcc
  Version nvcc;
  std::string nccl_header_path, nccl_library_path;
  Version nccl_header, nccl_library;

  // Python side.
  std::string python, python_error;
  Version python_version;
  std::string pythonpath_workdir;  // "yes", "no", "" (not checked)
  Version torch, torch_cuda, torch_nccl;
  std::string torch_error;
  Version horovod;
  std::string horovod_frameworks, horovod_controllers, horovod_ops, horovod_error;
  // py-spy, for the Python stacks of stall reports: "PATH VERSION" where the rank probe looks
  // (beside the probe's python, on PATH, ~/.local/bin); "" when none; unknown until Python ran.
  bool py_spy_probed = false;
  std::string py_spy;

  // dtrain-clip.
  std::string clip_path;
  Version clip;
  std::string clip_error;  // `dtrain-clip --version` failed: what it printed (missing libraries)

  // Rendezvous: "ok", "refused", "timeout", "unreachable", "untested", "" (not run).
  std::string rendezvous, rendezvous_detail;

  // Fitness to run a job: GPU state, NVLink, Xid errors, InfiniBand, host.
  NodeHealth health;

  // The NCCL jobs load: the library when found, else the header's version.
  const Version& Nccl() const { return nccl_library.known() ? nccl_library : nccl_header; }
};

using ProbeLines = std::vector<std::pair<std::string, std::string>>;

// Splits probe output into key=value pairs in order; other lines are dropped.
ProbeLines SplitProbeOutput(std::string_view text);
// A probe value's fields: "a;b;;c" -> {"a", "b", "", "c"}. With `max_parts`, the last part holds
// the rest, separators and all: ("a;b;c;d", ';', 2) -> {"a", "b;c;d"}.
std::vector<std::string> SplitOn(const std::string& value, char separator, size_t max_parts = 0);
// Fills `facts` from the probe's lines. `arrival_epoch_s` is the doctor's clock when the
// `time=` line arrived (for the clock offset); pass a negative value when unknown.
void ApplyProbeLines(const ProbeLines& lines, double arrival_epoch_s, NodeFacts& facts);

// Horovod's build as `horovodrun --check-build` describes it, "frameworks/controllers/tensor
// operations", e.g. "torch/gloo/gloo"; "none" for an empty part, "" without Horovod.
std::string HorovodBuild(const NodeFacts& f);

}  // namespace dtrain
