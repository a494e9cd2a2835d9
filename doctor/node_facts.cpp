// Probe output -> NodeFacts, and transport errors -> the reason a node was not reached.
#include "doctor/node_facts.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace dtrain {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

long long Number(const std::string& value) {
  return std::strtoll(value.c_str(), nullptr, 10);
}

Version VersionOrEmpty(std::optional<Version> v) {
  return v ? *v : Version{};
}

}  // namespace

const char* ReachFailureName(ReachFailure failure) {
  switch (failure) {
    case ReachFailure::kNone:
      return "";
    case ReachFailure::kAuth:
      return "auth";
    case ReachFailure::kHostKey:
      return "host key";
    case ReachFailure::kTimeout:
      return "timeout";
    case ReachFailure::kRefused:
      return "refused";
    case ReachFailure::kUnresolved:
      return "unknown host";
    case ReachFailure::kNetwork:
      return "network";
    case ReachFailure::kOther:
      return "other";
  }
  return "other";
}

ReachFailure ClassifyReachError(std::string_view error) {
  std::string e = Lower(error);
  if (Contains(e, "host key") || Contains(e, "known_hosts") || Contains(e, "known hosts")) {
    return ReachFailure::kHostKey;
  }
  // Before auth: "no reply while authenticating within 5 s (ssh.connect_timeout)" is a timeout.
  if (Contains(e, "timed out") || Contains(e, "timeout")) return ReachFailure::kTimeout;
  if (Contains(e, "auth") || Contains(e, "permission denied") || Contains(e, "publickey") ||
      Contains(e, "password")) {
    return ReachFailure::kAuth;
  }
  if (Contains(e, "refused")) return ReachFailure::kRefused;
  if (Contains(e, "unreachable") || Contains(e, "no route")) return ReachFailure::kNetwork;
  if (Contains(e, "resolve") || Contains(e, "name or service") || Contains(e, "unknown host")) {
    return ReachFailure::kUnresolved;
  }
  return ReachFailure::kOther;
}

ProbeLines SplitProbeOutput(std::string_view text) {
  ProbeLines lines;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t eq = line.find('=');
    if (eq == 0 || eq == std::string_view::npos) continue;
    std::string_view key = line.substr(0, eq);
    bool word = std::all_of(key.begin(), key.end(), [](char c) {
      return std::islower(static_cast<unsigned char>(c)) || c == '_';
    });
    if (word) lines.emplace_back(std::string(key), std::string(line.substr(eq + 1)));
  }
  return lines;
}

void ApplyProbeLines(const ProbeLines& lines, double arrival_epoch_s, NodeFacts& f) {
  std::string header_defines, proc_driver, nvcc_line, version_json, version_txt, lib_string;
  std::vector<std::string> proc_gpus;
  Version smi_driver;
  bool ended = false;
  for (const auto& [key, value] : lines) {
    if (key == "time") {
      double t = std::strtod(value.c_str(), nullptr);
      if (t > 0 && arrival_epoch_s >= 0) {
        f.clock_offset_s = t - arrival_epoch_s;
        f.clock_known = true;
      }
    } else if (key == "hostname") {
      f.hostname = value;
    } else if (key == "os") {
      f.os = value;
    } else if (key == "kernel") {
      f.kernel = value;
    } else if (key == "cpus") {
      f.cpus = static_cast<int>(Number(value));
    } else if (key == "mem_kib") {
      f.mem_kib = Number(value);
    } else if (key == "shm_kib") {
      f.shm_kib = Number(value);
    } else if (key == "disk_free_kib") {
      f.disk_free_kib = Number(value);
    } else if (key == "workdir") {
      f.workdir = value;
    } else if (key == "workdir_exists") {
      f.workdir_exists = value == "yes";
    } else if (key == "nofile") {
      f.nofile = value == "unlimited" ? -1 : Number(value);
    } else if (key == "driver_proc") {
      proc_driver = value;
    } else if (key == "gpu") {
      if (auto gpu = ParseNvidiaSmiGpuLine(value)) {
        if (!smi_driver.known()) smi_driver = VersionOrEmpty(Version::Parse(gpu->driver));
        f.gpus.push_back(*gpu);
      } else if (f.nvidia_smi_error.empty()) {
        f.nvidia_smi_error = value;
      }
    } else if (key == "gpu_proc") {
      proc_gpus.push_back(value);
    } else if (key == "nvidia_smi_error") {
      f.nvidia_smi_error = value;
    } else if (key == "cuda_home") {
      f.cuda_home = value;
    } else if (key == "cuda_version_json") {
      version_json = value;
    } else if (key == "cuda_version_txt") {
      version_txt = value;
    } else if (key == "nvcc") {
      nvcc_line = value;
    } else if (key == "nccl_h") {
      f.nccl_header_path = value;
    } else if (key == "nccl_define") {
      header_defines += value + "\n";
    } else if (key == "nccl_lib") {
      f.nccl_library_path = value;
    } else if (key == "nccl_lib_string") {
      lib_string = value;
    } else if (key == "python") {
      f.python = value;
    } else if (key == "python_error") {
      f.python_error = value;
    } else if (key == "python_version") {
      f.python_version = VersionOrEmpty(Version::Parse(value));
    } else if (key == "pythonpath_workdir") {
      f.pythonpath_workdir = value;
    } else if (key == "torch") {
      f.torch = VersionOrEmpty(Version::Find(value));
      f.torch.text = value;  // keep "2.4.0+cu121" for display
    } else if (key == "torch_cuda") {
      f.torch_cuda = VersionOrEmpty(Version::Parse(value));
    } else if (key == "torch_nccl") {
      f.torch_nccl = VersionOrEmpty(NcclFromTorch(value));
    } else if (key == "torch_error") {
      f.torch_error = value;
    } else if (key == "horovod") {
      f.horovod = VersionOrEmpty(Version::Find(value));
    } else if (key == "horovod_frameworks") {
      f.horovod_frameworks = value;
    } else if (key == "horovod_controllers") {
      f.horovod_controllers = value;
    } else if (key == "horovod_ops") {
      f.horovod_ops = value;
    } else if (key == "horovod_error") {
      f.horovod_error = value;
    } else if (key == "clip") {
      f.clip_path = value;
    } else if (key == "clip_version") {
      f.clip = VersionOrEmpty(Version::Find(value));
    } else if (key == "clip_error") {
      f.clip_error = value;
    } else if (key == "rdzv") {
      f.rendezvous = value;
    } else if (key == "rdzv_detail") {
      f.rendezvous_detail = value;
    } else if (key == "probe_end") {
      ended = true;
    }
  }
  if (smi_driver.known()) {
    f.driver = smi_driver;
  }
  if (auto proc = ParseProcDriverVersion(proc_driver)) {
    if (!f.driver.known()) f.driver = proc->version;
    f.driver_open_module = proc->open_module;
  }
  if (f.gpus.empty() && !proc_gpus.empty()) {
    for (const std::string& model : proc_gpus) f.gpus.push_back(GpuInfo{model, 0, f.driver.text});
    f.gpus_from_proc = true;
  }
  f.nvcc = VersionOrEmpty(CudaFromNvcc(nvcc_line));
  if (auto v = CudaFromVersionJson(version_json)) {
    f.cuda = *v;
  } else if (auto t = CudaFromVersionTxt(version_txt)) {
    f.cuda = *t;
  } else {
    f.cuda = f.nvcc;
  }
  f.nccl_header = VersionOrEmpty(NcclFromHeader(header_defines));
  f.nccl_library = VersionOrEmpty(NcclFromLibraryName(f.nccl_library_path));
  if (!f.nccl_library.known()) f.nccl_library = VersionOrEmpty(NcclFromLibraryString(lib_string));
  if (ended) f.reached = true;
}

std::string HorovodBuild(const NodeFacts& f) {
  if (!f.horovod.known()) return "";
  auto part = [](const std::string& s) { return s.empty() ? std::string("none") : s; };
  return part(f.horovod_frameworks) + "/" + part(f.horovod_controllers) + "/" + part(f.horovod_ops);
}

}  // namespace dtrain
