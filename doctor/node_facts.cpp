// Probe output -> NodeFacts.
#include "doctor/node_facts.h"

#include <algorithm>
#include <cstdlib>

#include "doctor/tool_output_text.h"

namespace dtrain {
namespace {

long long Number(const std::string& value) {
  return std::strtoll(value.c_str(), nullptr, 10);
}

Version VersionOrEmpty(std::optional<Version> v) {
  return v ? *v : Version{};
}

}  // namespace

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

std::vector<std::string> SplitOn(const std::string& value, char separator, size_t max_parts) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = max_parts && parts.size() + 1 == max_parts ? std::string::npos
                                                           : value.find(separator, start);
    parts.push_back(value.substr(start, at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return parts;
}

namespace {

// What several probe lines hold before they combine into one fact (a version from one of
// several sources), and the doctor's clock when the `time=` line arrived.
struct ProbeText {
  double arrival_epoch_s = -1;
  std::string header_defines, proc_driver, nvcc_line, version_json, version_txt, lib_string;
  std::vector<std::string> proc_gpus;
  Version smi_driver;
  std::string smi_q, smi_topo, smi_nvlink, smi_nvlink_errors;  // nvidia-smi's texts
  std::vector<std::string> xid_lines;
  std::vector<std::string> host_error_lines;
  bool ended = false;
};

using ApplyValue = void (*)(const std::string& value, NodeFacts& f, ProbeText& t);

void ApplyTime(const std::string& value, NodeFacts& f, ProbeText& t) {
  const double node_time = std::strtod(value.c_str(), nullptr);
  if (node_time > 0 && t.arrival_epoch_s >= 0) {
    f.clock_offset_s = node_time - t.arrival_epoch_s;
    f.clock_known = true;
  }
}

void ApplyGpu(const std::string& value, NodeFacts& f, ProbeText& t) {
  if (auto gpu = ParseNvidiaSmiGpuLine(value)) {
    if (!t.smi_driver.known()) t.smi_driver = VersionOrEmpty(Version::Parse(gpu->driver));
    f.gpus.push_back(*gpu);
  } else if (f.nvidia_smi_error.empty()) {
    f.nvidia_smi_error = value;
  }
}

// "mlx5_0/1;4: ACTIVE;5: LinkUp;400 Gb/sec (4X NDR);InfiniBand"
void ApplyInfinibandPort(const std::string& value, NodeFacts& f, ProbeText&) {
  std::vector<std::string> parts = SplitOn(value, ';');
  parts.resize(5);
  f.health.ib_ports.push_back({parts[0], parts[1], parts[2], parts[3], parts[4]});
}

// "NAME=COUNT" items after the first of `parts`; an item whose count is not a count is left out
// (it is not judged).
std::map<std::string, long long> Counts(const std::vector<std::string>& parts) {
  std::map<std::string, long long> out;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == 0 || eq == std::string::npos) continue;
    const long long count = CountOrMinusOne(std::string_view(parts[i]).substr(eq + 1));
    if (count >= 0) out[parts[i].substr(0, eq)] = count;
  }
  return out;
}

// "mlx5_0/1;symbol_error=0;link_downed=1": the error counters of a port listed before.
void ApplyInfinibandCounters(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';');
  for (InfinibandPort& port : f.health.ib_ports) {
    if (port.name == parts[0]) port.counters = Counts(parts);
  }
}

// "mlx5_0;correctable=3;nonfatal=0;fatal=0": a NIC's PCIe error totals.
void ApplyNicPcieErrors(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';');
  if (parts[0].empty()) return;
  f.health.nic_pcie_errors.push_back({parts[0], Counts(parts)});
}

// "workdir;66527632;/;/root": what, free KiB, mount point, path (last: it may hold ';').
void ApplyFreeSpace(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';', 4);
  if (parts.size() < 4) return;
  f.health.free_space.push_back({parts[0], parts[3], parts[2], Number(parts[1]), ""});
}

// "mc0;12;0" (a memory controller: CE, UE) or "mc0;dimm3;12;0;CPU_SrcID#0_MC#0_Chan#1_DIMM#0"
// (a DIMM: CE, UE, its label, which may hold ';').
void ApplyMemoryController(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';');
  if (parts.size() < 3) return;
  f.health.memory_error_counts.push_back({parts[0], "", "", Number(parts[1]), Number(parts[2])});
}
void ApplyMemoryDimm(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';', 5);
  if (parts.size() < 5) return;
  f.health.memory_error_counts.push_back(
      {parts[0], parts[1], parts[4], Number(parts[2]), Number(parts[3])});
}

// "log dir;nfs4": what, the type of the file system where it is (after its free space line).
void ApplyFileSystemType(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';', 2);
  if (parts.size() < 2) return;
  for (auto s = f.health.free_space.rbegin(); s != f.health.free_space.rend(); ++s) {
    if (s->what == parts[0]) {
      s->type = parts[1];
      return;
    }
  }
}

// shm_unheld "KIB;FILES;SEGMENT_KIB;SEGMENTS", shm_file
// "KIB;UID;USER;MTIME;AGE_S;HELD;SEGMENT;NAME" (HELD 1, 0 or -; the name last: it may hold ';').
void ApplySharedMemoryUnheld(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';');
  if (parts.size() < 2) return;
  f.health.shm.unheld_kib = Number(parts[0]);
  f.health.shm.unheld_files = Number(parts[1]);
  if (parts.size() < 4) return;
  f.health.shm.unheld_segment_kib = Number(parts[2]);
  f.health.shm.unheld_segments = Number(parts[3]);
}
void ApplySharedMemoryFile(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';', 8);
  if (parts.size() < 8) return;
  const int held = parts[5] == "1" ? 1 : (parts[5] == "0" ? 0 : -1);
  f.health.shm.files.push_back({Number(parts[0]), parts[1], parts[2], parts[7], Number(parts[3]),
                                Number(parts[4]), held, parts[6] == "1"});
}

// "log dir;fsync: Input/output error;/data/logs;/data/logs/job": what, result, the folder written
// in, the path (last: it may hold ';').
void ApplyWriteTest(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';', 4);
  if (parts.size() < 4) return;
  f.health.write_tests.push_back({parts[0], parts[2], parts[3], parts[1]});
}

// "IPv4;904;1063;128;512;1024": family, entries, times full since boot, gc_thresh1..3.
void ApplyNeighbourTable(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';');
  if (parts.size() != 6 || parts[0].empty()) return;
  f.health.neighbour_tables.push_back({parts[0], Number(parts[1]), Number(parts[2]),
                                       Number(parts[3]), Number(parts[4]), Number(parts[5])});
}

// "eth0;up;10.0.0.5/24,fe80::1/64": an interface, its operstate and addresses ("?": unknown).
void ApplyNetworkInterface(const std::string& value, NodeFacts& f, ProbeText&) {
  std::vector<std::string> parts = SplitOn(value, ';');
  if (parts.size() != 3 || parts[0].empty()) return;
  NetworkInterface i{parts[0], parts[1], {}, parts[2] != "?"};
  if (i.addresses_known && !parts[2].empty()) i.addresses = SplitOn(parts[2], ',');
  f.health.interfaces.push_back(std::move(i));
}

// "NCCL_SOCKET_IFNAME;^docker,lo": a variable and its value (which may hold ';').
void ApplyInterfaceEnv(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';', 2);
  if (parts.size() < 2 || parts[0].empty()) return;
  f.health.interface_env[parts[0]] = parts[1];
}

// "2;1;35;/scratch is not mounted": a health check's index, exit status, milliseconds and last
// line (last: it may hold ';').
void ApplyHealthCheck(const std::string& value, NodeFacts& f, ProbeText&) {
  const std::vector<std::string> parts = SplitOn(value, ';', 4);
  if (parts.size() < 4) return;
  // Each of the three numbers: digits only, at most 12 of them; a line that is not so is left
  // out (the check then gave no answer).
  auto digits = [](const std::string& text) {
    return !text.empty() && text.size() <= 12 &&
           text.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(parts[0]) || !digits(parts[1]) || !digits(parts[2])) return;
  HealthCheckAnswer answer;
  answer.index = static_cast<size_t>(Number(parts[0]));
  answer.exit_status = static_cast<int>(std::min(Number(parts[1]), 255LL));
  answer.ms = Number(parts[2]);
  answer.last_line = parts[3];
  // What a site's command printed goes to a terminal: no control characters (escape sequences).
  for (char& ch : answer.last_line) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  }
  f.health.health_checks.push_back(std::move(answer));
}

// "gpu;;0000:1b:00.0;DMA-FQ;0000:00:01.0,0000:01:00.0,0000:02:08.0" (kind, NIC name, address,
// IOMMU group type, bridges from the root port down).
void ApplyPciDevice(const std::string& value, NodeFacts& f, ProbeText&) {
  std::vector<std::string> parts = SplitOn(value, ';');
  if (parts.size() < 5) return;
  PciPathDevice d{parts[0], parts[1], parts[2], parts[3], {}};
  if (!parts[4].empty()) d.bridges = SplitOn(parts[4], ',');
  f.health.pci_devices.push_back(std::move(d));
}

// "0000:02:08.0;001d" or "0000:02:08.0;unreadable".
void ApplyPciAcs(const std::string& value, NodeFacts& f, ProbeText&) {
  std::vector<std::string> parts = SplitOn(value, ';');
  if (parts.size() != 2) return;
  PciBridgeAcs acs{parts[0], -1};
  if (parts[1] != "unreadable") {
    char* end = nullptr;
    const long control = std::strtol(parts[1].c_str(), &end, 16);
    if (parts[1].empty() || *end != '\0' || control < 0 || control > 0xffff) return;
    acs.control = static_cast<int>(control);
  }
  f.health.pci_acs.push_back(acs);
}

void ApplyTorch(const std::string& value, NodeFacts& f, ProbeText&) {
  f.torch = VersionOrEmpty(Version::Find(value));
  f.torch.text = value;  // keep "2.4.0+cu121" for display
}

// One key the probe writes (templates/probe.sh) and where its value goes: into a fact as it is,
// into the text several lines combine (CombineProbeText), or through a function.
struct ProbeKey {
  std::string_view key;
  std::string NodeFacts::*fact = nullptr;
  std::string ProbeText::*text = nullptr;
  ApplyValue apply = nullptr;
};

using F = NodeFacts;
using T = ProbeText;
const ProbeKey kProbeKeys[] = {
    {"time", nullptr, nullptr, ApplyTime},
    {"hostname", &F::hostname},
    {"os", &F::os},
    {"kernel", &F::kernel},
    {"cpus", nullptr, nullptr, [](const std::string& v, F& f, T&) { f.cpus = int(Number(v)); }},
    {"mem_kib", nullptr, nullptr, [](const std::string& v, F& f, T&) { f.mem_kib = Number(v); }},
    {"shm_kib", nullptr, nullptr, [](const std::string& v, F& f, T&) { f.shm_kib = Number(v); }},
    {"disk_free_kib", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.disk_free_kib = Number(v); }},
    {"workdir", &F::workdir},
    {"workdir_exists", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.workdir_exists = v == "yes"; }},
    {"nofile", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.nofile = v == "unlimited" ? -1 : Number(v); }},
    {"memlock", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.memlock_kib = v == "unlimited" ? -1 : Number(v); }},
    {"driver_proc", nullptr, &T::proc_driver},
    {"gpu", nullptr, nullptr, ApplyGpu},
    {"gpu_proc", nullptr, nullptr,
     [](const std::string& v, F&, T& t) { t.proc_gpus.push_back(v); }},
    {"nvidia_smi_error", &F::nvidia_smi_error},
    {"cuda_home", &F::cuda_home},
    {"cuda_version_json", nullptr, &T::version_json},
    {"cuda_version_txt", nullptr, &T::version_txt},
    {"nvcc", nullptr, &T::nvcc_line},
    {"nccl_h", &F::nccl_header_path},
    {"nccl_define", nullptr, nullptr,
     [](const std::string& v, F&, T& t) { t.header_defines += v + "\n"; }},
    {"nccl_lib", &F::nccl_library_path},
    {"nccl_lib_string", nullptr, &T::lib_string},
    {"python", &F::python},
    {"python_error", &F::python_error},
    {"python_version", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.python_version = VersionOrEmpty(Version::Parse(v)); }},
    {"pythonpath_workdir", &F::pythonpath_workdir},
    {"torch", nullptr, nullptr, ApplyTorch},
    {"torch_cuda", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.torch_cuda = VersionOrEmpty(Version::Parse(v)); }},
    {"torch_nccl", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.torch_nccl = VersionOrEmpty(NcclFromTorch(v)); }},
    {"torch_error", &F::torch_error},
    {"horovod", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.horovod = VersionOrEmpty(Version::Find(v)); }},
    {"horovod_frameworks", &F::horovod_frameworks},
    {"horovod_controllers", &F::horovod_controllers},
    {"horovod_ops", &F::horovod_ops},
    {"horovod_error", &F::horovod_error},
    {"py_spy", nullptr, nullptr,
     [](const std::string& v, F& f, T&) {
       f.py_spy_probed = true;
       f.py_spy = v;
     }},
    {"rdzv", &F::rendezvous},
    {"rdzv_detail", &F::rendezvous_detail},
    {"clip_version", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.clip = VersionOrEmpty(Version::Find(v)); }},
    {"clip", &F::clip_path},
    {"clip_error", &F::clip_error},
    {"smi_timeout", nullptr, nullptr,
     [](const std::string& v, F& f, T&) {
       f.health.smi_timeout_s = std::max(f.health.smi_timeout_s, std::strtod(v.c_str(), nullptr));
     }},
    {"smi_q", nullptr, nullptr, [](const std::string& v, F&, T& t) { t.smi_q += v + "\n"; }},
    {"smi_q_error", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.smi_error = v; }},
    {"smi_topo", nullptr, nullptr, [](const std::string& v, F&, T& t) { t.smi_topo += v + "\n"; }},
    {"smi_nvlink", nullptr, nullptr,
     [](const std::string& v, F&, T& t) { t.smi_nvlink += v + "\n"; }},
    {"smi_nvlink_errors", nullptr, nullptr,
     [](const std::string& v, F&, T& t) { t.smi_nvlink_errors += v + "\n"; }},
    {"nvswitch", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.nvswitch_devices = v == "yes"; }},
    {"fabricmanager", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.fabric_manager = v; }},
    {"kernel_log", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.kernel_log = v; }},
    {"kernel_log_error", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.kernel_log_error = v; }},
    {"xid_line", nullptr, nullptr,
     [](const std::string& v, F&, T& t) { t.xid_lines.push_back(v); }},
    {"xid_lines_total", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.xid_lines_total = Number(v); }},
    {"host_error_line", nullptr, nullptr,
     [](const std::string& v, F&, T& t) { t.host_error_lines.push_back(v); }},
    {"host_error_lines_total", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.host_error_lines_total = Number(v); }},
    {"ib_port", nullptr, nullptr, ApplyInfinibandPort},
    {"ib_counters", nullptr, nullptr, ApplyInfinibandCounters},
    {"ib_aer", nullptr, nullptr, ApplyNicPcieErrors},
    {"peermem", nullptr, nullptr, [](const std::string& v, F& f, T&) { f.health.peermem = v; }},
    {"pci_device", nullptr, nullptr, ApplyPciDevice},
    {"pci_acs", nullptr, nullptr, ApplyPciAcs},
    {"swap_kib", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.swap_kib = Number(v); }},
    {"clocksource", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.clocksource = v; }},
    {"clocksources_available", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.clocksources_available = v; }},
    {"free_space", nullptr, nullptr, ApplyFreeSpace},
    {"fs_type", nullptr, nullptr, ApplyFileSystemType},
    {"edac_mc", nullptr, nullptr, ApplyMemoryController},
    {"edac_dimm", nullptr, nullptr, ApplyMemoryDimm},
    {"write_test", nullptr, nullptr, ApplyWriteTest},
    {"shm_free_kib", nullptr, nullptr,
     [](const std::string& v, F& f, T&) { f.health.shm.free_kib = Number(v); }},
    {"shm_unheld", nullptr, nullptr, ApplySharedMemoryUnheld},
    {"shm_file", nullptr, nullptr, ApplySharedMemoryFile},
    {"neigh_table", nullptr, nullptr, ApplyNeighbourTable},
    {"health_check", nullptr, nullptr, ApplyHealthCheck},
    {"net_if", nullptr, nullptr, ApplyNetworkInterface},
    {"net_read", nullptr, nullptr,
     [](const std::string&, F& f, T&) { f.health.interfaces_read = true; }},
    {"net_env", nullptr, nullptr, ApplyInterfaceEnv},
    {"probe_end", nullptr, nullptr, [](const std::string&, F&, T& t) { t.ended = true; }},
};

// nvidia-smi's texts and the kernel log's Xid lines, parsed.
void CombineHealthText(const ProbeText& t, NodeHealth& h) {
  if (!t.smi_q.empty()) {
    h.smi = ParseNvidiaSmiQuery(t.smi_q);
    h.smi_reported = h.smi.attached >= 0 || !h.smi.gpus.empty();
  }
  h.nvlink_peers = ParseTopologyNvlinkPeers(t.smi_topo);
  h.nvlinks = ParseNvlinkStatus(t.smi_nvlink);
  h.nvlink_errors = ParseNvlinkErrors(t.smi_nvlink_errors);
  h.xids = ParseXidLines(t.xid_lines);
  h.host_errors = ParseHostErrorLines(t.host_error_lines);
  h.host_error_lines_sent = static_cast<long long>(t.host_error_lines.size());
  h.host_error_lines_total = std::max(h.host_error_lines_total, h.host_error_lines_sent);
  if (h.xid_lines_total < static_cast<long long>(t.xid_lines.size())) {
    h.xid_lines_total = static_cast<long long>(t.xid_lines.size());
  }
}

// The facts several lines make together: the driver, the GPU list, CUDA and NCCL versions.
void CombineProbeText(const ProbeText& t, NodeFacts& f) {
  if (t.smi_driver.known()) {
    f.driver = t.smi_driver;
  }
  if (auto proc = ParseProcDriverVersion(t.proc_driver)) {
    if (!f.driver.known()) f.driver = proc->version;
    f.driver_open_module = proc->open_module;
  }
  f.health.gpus_in_driver = static_cast<int>(t.proc_gpus.size());
  if (f.gpus.empty() && !t.proc_gpus.empty()) {
    for (const std::string& model : t.proc_gpus) f.gpus.push_back(GpuInfo{model, 0, f.driver.text});
    f.gpus_from_proc = true;
  }
  f.nvcc = VersionOrEmpty(CudaFromNvcc(t.nvcc_line));
  if (auto v = CudaFromVersionJson(t.version_json)) {
    f.cuda = *v;
  } else if (auto txt = CudaFromVersionTxt(t.version_txt)) {
    f.cuda = *txt;
  } else {
    f.cuda = f.nvcc;
  }
  f.nccl_header = VersionOrEmpty(NcclFromHeader(t.header_defines));
  f.nccl_library = VersionOrEmpty(NcclFromLibraryName(f.nccl_library_path));
  if (!f.nccl_library.known()) f.nccl_library = VersionOrEmpty(NcclFromLibraryString(t.lib_string));
  CombineHealthText(t, f.health);
  if (t.ended) f.reached = true;
}

}  // namespace

void ApplyProbeLines(const ProbeLines& lines, double arrival_epoch_s, NodeFacts& f) {
  ProbeText text;
  text.arrival_epoch_s = arrival_epoch_s;
  for (const auto& [key, value] : lines) {
    for (const ProbeKey& row : kProbeKeys) {
      if (key != row.key) continue;
      if (row.fact) f.*row.fact = value;
      if (row.text) text.*row.text = value;
      if (row.apply) row.apply(value, f, text);
      break;
    }
  }
  CombineProbeText(text, f);
}

std::string HorovodBuild(const NodeFacts& f) {
  if (!f.horovod.known()) return "";
  auto part = [](const std::string& s) { return s.empty() ? std::string("none") : s; };
  return part(f.horovod_frameworks) + "/" + part(f.horovod_controllers) + "/" + part(f.horovod_ops);
}

}  // namespace dtrain
