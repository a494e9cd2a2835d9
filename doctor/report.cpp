// Report rendering: the text table with findings, and the JSON document.
#include "doctor/report.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dtrain {
namespace {

const char* kRed = "\033[31m";
const char* kYellow = "\033[33m";
const char* kGreen = "\033[32m";
const char* kBold = "\033[1m";
const char* kReset = "\033[0m";

std::string Size(long long kib) {
  if (kib <= 0) return "-";
  double gib = static_cast<double>(kib) / (1024.0 * 1024.0);
  return gib >= 10 ? fmt::format("{:.0f}G", gib) : fmt::format("{:.1f}G", gib);
}

std::string V(const Version& v) {
  return v.known() ? v.text : "-";
}

// "fails" where the tool is there but could not tell its version (an import error, say).
std::string VersionOrFails(const Version& v, const std::string& error) {
  return v.known() || error.empty() ? V(v) : "fails";
}

std::string Gpus(const NodeFacts& n) {
  if (n.gpus.empty()) return "0";
  std::string name = n.gpus[0].name;
  if (name.rfind("NVIDIA ", 0) == 0) name = name.substr(7);
  return fmt::format("{}x {}", n.gpus.size(), name);
}

double MedianOffset(const std::vector<NodeFacts>& nodes) {
  std::vector<double> offsets;
  for (const auto& n : nodes) {
    if (n.reached && n.clock_known) offsets.push_back(n.clock_offset_s);
  }
  if (offsets.empty()) return 0;
  std::sort(offsets.begin(), offsets.end());
  return offsets[offsets.size() / 2];
}

// One table column: its header, the fact name findings use, and how to print a node's cell.
struct Column {
  const char* header;
  const char* fact;
  std::function<std::string(const NodeFacts&)> cell;
};

std::vector<Column> Columns(double median_offset) {
  return {
      {"node", "", [](const NodeFacts& n) { return n.host; }},
      {"reach", "reach",
       [](const NodeFacts& n) {
         return n.reached ? std::string("ok")
                : n.failure == ReachFailure::kOther || n.failure == ReachFailure::kNone
                    ? std::string("no")
                    : std::string("no: ") + ReachFailureName(n.failure);
       }},
      {"cpus", "", [](const NodeFacts& n) { return n.cpus ? std::to_string(n.cpus) : "-"; }},
      {"mem", "", [](const NodeFacts& n) { return Size(n.mem_kib); }},
      {"shm", "shm", [](const NodeFacts& n) { return Size(n.shm_kib); }},
      {"driver", "driver", [](const NodeFacts& n) { return V(n.driver); }},
      {"gpus", "gpus", [](const NodeFacts& n) { return n.reached ? Gpus(n) : "-"; }},
      {"cuda", "cuda", [](const NodeFacts& n) { return V(n.cuda); }},
      {"nccl", "nccl", [](const NodeFacts& n) { return V(n.Nccl()); }},
      {"python", "python", [](const NodeFacts& n) { return V(n.python_version); }},
      {"torch", "torch", [](const NodeFacts& n) { return VersionOrFails(n.torch, n.torch_error); }},
      {"horovod", "horovod",
       [](const NodeFacts& n) { return VersionOrFails(n.horovod, n.horovod_error); }},
      {"horovod build", "horovod",
       [](const NodeFacts& n) {
         const std::string build = HorovodBuild(n);
         return build.empty() ? std::string("-") : build;
       }},
      {"pythonpath", "pythonpath",
       [](const NodeFacts& n) {
         if (!n.reached) return std::string("-");
         if (!n.workdir_exists) return std::string("no workdir");
         return n.pythonpath_workdir.empty() ? std::string("-") : n.pythonpath_workdir;
       }},
      {"clip", "clip",
       [](const NodeFacts& n) {
         return n.clip_path.empty() ? std::string("-") : VersionOrFails(n.clip, n.clip_error);
       }},
      {"rdzv", "rdzv",
       [](const NodeFacts& n) { return n.rendezvous.empty() ? "-" : n.rendezvous; }},
      {"clock", "clock",
       [median_offset](const NodeFacts& n) {
         if (!n.reached || !n.clock_known) return std::string("-");
         return fmt::format("{:+.0f}ms", (n.clock_offset_s - median_offset) * 1000);
       }},
  };
}

// (node, fact) -> the worst severity among findings that name them.
std::map<std::pair<std::string, std::string>, Severity> OddCells(
    const std::vector<Finding>& findings) {
  std::map<std::pair<std::string, std::string>, Severity> odd;
  for (const auto& f : findings) {
    if (f.severity == Severity::kOk || f.fact.empty()) continue;
    for (const auto& node : f.nodes) {
      auto& s = odd[{node, f.fact}];
      s = std::max(s, f.severity);
    }
  }
  return odd;
}

const char* SeverityColour(Severity s) {
  return s == Severity::kError ? kRed : s == Severity::kWarning ? kYellow : kGreen;
}

std::string RenderTable(const ProbeRun& run, const std::vector<Finding>& findings, bool colour,
                        bool* marked) {
  auto columns = Columns(MedianOffset(run.nodes));
  auto odd = OddCells(findings);
  std::vector<std::vector<std::string>> cells(run.nodes.size());
  std::vector<std::vector<Severity>> marks(run.nodes.size());
  std::vector<size_t> width;
  for (const auto& c : columns) width.push_back(std::string(c.header).size());
  for (size_t r = 0; r < run.nodes.size(); ++r) {
    const NodeFacts& n = run.nodes[r];
    for (size_t c = 0; c < columns.size(); ++c) {
      std::string text = columns[c].cell(n);
      auto it = odd.find({n.host, columns[c].fact});
      Severity s = it == odd.end() ? Severity::kOk : it->second;
      if (s != Severity::kOk && !colour) {
        text += "*";
        *marked = true;
      }
      width[c] = std::max(width[c], text.size());
      cells[r].push_back(std::move(text));
      marks[r].push_back(s);
    }
  }
  std::string out;
  for (size_t c = 0; c < columns.size(); ++c) {
    std::string h = fmt::format("{:<{}}", columns[c].header, width[c]);
    out += (c ? "  " : "") + (colour ? kBold + h + kReset : h);
  }
  out += "\n";
  for (size_t r = 0; r < cells.size(); ++r) {
    for (size_t c = 0; c < columns.size(); ++c) {
      std::string text = fmt::format("{:<{}}", cells[r][c], width[c]);
      if (colour && marks[r][c] != Severity::kOk) {
        text = SeverityColour(marks[r][c]) + text + kReset;
      }
      out += (c ? "  " : "") + text;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  }
  return out;
}

nlohmann::json VersionJson(const Version& v) {
  return v.known() ? nlohmann::json(v.text) : nlohmann::json(nullptr);
}

nlohmann::json OrNull(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

nlohmann::json NumberOrNull(long long n) {
  return n < 0 ? nlohmann::json(nullptr) : nlohmann::json(n);
}

nlohmann::json GpuHealthJson(const GpuHealth& g, const NodeHealth& h) {
  nlohmann::json processes = nlohmann::json::array();
  for (const GpuProcess& p : g.processes) {
    processes.push_back({{"pid", NumberOrNull(p.pid)},
                         {"name", OrNull(p.name)},
                         {"used_mib", NumberOrNull(p.used_mib)}});
  }
  nlohmann::json nvlink = nullptr;
  for (const GpuNvlinks& links : h.nvlinks) {
    if (links.gpu != g.index) continue;
    nvlink = {{"active", links.active}, {"inactive", links.inactive}};
  }
  return {{"index", g.index},
          {"bus_id", g.bus_id},
          {"name", OrNull(g.name)},
          {"persistence_mode", OrNull(g.persistence_mode)},
          {"ecc_mode", OrNull(g.ecc_current)},
          {"ecc_mode_pending", OrNull(g.ecc_pending)},
          {"volatile_dram_uncorrectable", NumberOrNull(g.dram_uncorrectable)},
          {"volatile_sram_uncorrectable", NumberOrNull(g.sram_uncorrectable)},
          {"remapped_rows_pending", OrNull(g.remapped_rows_pending)},
          {"remapping_failure", OrNull(g.remapping_failure)},
          {"retired_pages_pending", OrNull(g.retired_pages_pending)},
          {"recovery_action", OrNull(g.recovery_action)},
          {"mig_mode", OrNull(g.mig_current)},
          {"mig_mode_pending", OrNull(g.mig_pending)},
          {"virtualization_mode", OrNull(g.virtualization_mode)},
          {"pcie_gen", NumberOrNull(g.pcie_gen_current)},
          {"pcie_gen_max", NumberOrNull(g.pcie_gen_max)},
          {"pcie_width", NumberOrNull(g.pcie_width_current)},
          {"pcie_width_max", NumberOrNull(g.pcie_width_max)},
          {"pcie_replays", NumberOrNull(g.pcie_replays)},
          {"pcie_replay_rollovers", NumberOrNull(g.pcie_replay_rollovers)},
          {"idle", g.idle},
          {"hw_slowdowns", g.hw_slowdowns},
          {"fb_used_mib", NumberOrNull(g.fb_used_mib)},
          {"fb_total_mib", NumberOrNull(g.fb_total_mib)},
          {"processes", processes},
          {"fabric_state", OrNull(g.fabric_state)},
          {"fabric_status", OrNull(g.fabric_status)},
          {"nvlink_peers", g.index < static_cast<int>(h.nvlink_peers.size())
                               ? nlohmann::json(h.nvlink_peers[g.index])
                               : nlohmann::json(nullptr)},
          {"nvlink", nvlink}};
}

nlohmann::json HealthJson(const NodeHealth& h, const ClusterSpec& spec) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuHealth& g : h.smi.gpus) gpus.push_back(GpuHealthJson(g, h));
  nlohmann::json xids = nlohmann::json::array();
  for (const XidEvent& e : h.xids) {
    const GpuHealth* gpu = e.switch_xid ? nullptr : h.GpuAt(e.device);
    xids.push_back({{"kind", e.switch_xid ? "sxid" : "xid"},
                    {"device", e.device},
                    {"gpu", gpu ? nlohmann::json(gpu->index) : nlohmann::json(nullptr)},
                    {"code", e.code},
                    {"text", e.text}});
  }
  nlohmann::json host_errors = nlohmann::json::array();
  for (const HostErrorEvent& e : h.host_errors) {
    host_errors.push_back({{"kind", HostErrorKindName(e.kind)},
                           {"subject", OrNull(e.subject)},
                           {"count", e.count},
                           {"line", e.line}});
  }
  nlohmann::json memory_errors = nlohmann::json::array();
  for (const MemoryErrorCount& c : h.memory_error_counts) {
    memory_errors.push_back({{"controller", c.controller},
                             {"dimm", OrNull(c.dimm)},
                             {"label", OrNull(c.label)},
                             {"corrected", c.corrected},
                             {"uncorrected", c.uncorrected}});
  }
  nlohmann::json ports = nlohmann::json::array();
  for (const InfinibandPort& p : h.ib_ports) {
    ports.push_back({{"port", p.name},
                     {"state", p.state},
                     {"phys_state", p.phys_state},
                     {"rate", p.rate},
                     {"link_layer", p.link_layer},
                     {"counters", p.counters}});
  }
  nlohmann::json nic_pcie = nlohmann::json::object();
  for (const NicPcieErrors& n : h.nic_pcie_errors) nic_pcie[n.nic] = n.totals;
  nlohmann::json nvlink_errors = nlohmann::json::array();
  for (const NvlinkErrorCount& e : h.nvlink_errors) {
    nvlink_errors.push_back(
        {{"gpu", e.gpu}, {"link", e.link}, {"counter", e.counter}, {"value", e.value}});
  }
  nlohmann::json pci = nlohmann::json::array();
  for (const PciPathDevice& d : h.pci_devices) {
    pci.push_back({{"kind", d.kind},
                   {"name", OrNull(d.name)},
                   {"address", d.address},
                   {"iommu_group_type", OrNull(d.iommu_type)},
                   {"bridges", d.bridges}});
  }
  nlohmann::json acs = nlohmann::json::object();
  for (const PciBridgeAcs& a : h.pci_acs) {
    acs[a.address] = a.control < 0 ? nlohmann::json("unreadable") : nlohmann::json(a.control);
  }
  nlohmann::json space = nlohmann::json::array();
  for (const FreeSpace& f : h.free_space) {
    space.push_back({{"what", f.what},
                     {"path", f.path},
                     {"mount", f.mount},
                     {"type", OrNull(f.type)},
                     {"free_kib", f.free_kib}});
  }
  nlohmann::json shm_files = nlohmann::json::array();
  for (const SharedMemoryFile& f : h.shm.files) {
    shm_files.push_back(
        {{"name", f.name},
         {"kib", f.kib},
         {"owner", f.owner},
         {"uid", f.uid},
         {"mtime", f.mtime},
         {"age_s", f.age_s},
         {"held", f.held < 0 ? nlohmann::json(nullptr) : nlohmann::json(f.held == 1)},
         {"segment", f.segment}});
  }
  const nlohmann::json shm = {
      {"free_kib", NumberOrNull(h.shm.free_kib)}, {"unheld_kib", h.shm.unheld_kib},
      {"unheld_files", h.shm.unheld_files},       {"unheld_segment_kib", h.shm.unheld_segment_kib},
      {"unheld_segments", h.shm.unheld_segments}, {"files", shm_files}};
  nlohmann::json writes = nlohmann::json::array();
  for (const WriteTest& w : h.write_tests) {
    writes.push_back(
        {{"what", w.what}, {"path", w.path}, {"folder", w.folder}, {"result", w.result}});
  }
  nlohmann::json neighbours = nlohmann::json::object();
  for (const NeighbourTable& t : h.neighbour_tables) {
    neighbours[t.family] = {{"entries", NumberOrNull(t.entries)},
                            {"full_since_boot", NumberOrNull(t.fulls)},
                            {"gc_thresh1", NumberOrNull(t.gc_thresh1)},
                            {"gc_thresh2", NumberOrNull(t.gc_thresh2)},
                            {"gc_thresh3", NumberOrNull(t.gc_thresh3)}};
  }
  // The network interfaces (null where the probe did not list them); addresses null where the
  // node has no `ip`.
  nlohmann::json interfaces = nlohmann::json(nullptr);
  if (h.interfaces_read) {
    interfaces = nlohmann::json::array();
    for (const NetworkInterface& i : h.interfaces) {
      interfaces.push_back({{"name", i.name},
                            {"state", i.state},
                            {"addresses", i.addresses_known ? nlohmann::json(i.addresses)
                                                            : nlohmann::json(nullptr)}});
    }
  }
  // The cluster file's health checks, by name, as each ended on the node.
  nlohmann::json checks = nlohmann::json::object();
  for (const HealthCheckAnswer& a : h.health_checks) {
    if (a.index >= spec.health_checks.size()) continue;
    checks[spec.health_checks[a.index].name] = {
        {"exit_status", a.exit_status}, {"ms", a.ms}, {"last_line", a.last_line}};
  }
  return {{"nvidia_smi_timeout_s",
           h.smi_timeout_s > 0 ? nlohmann::json(h.smi_timeout_s) : nlohmann::json(nullptr)},
          {"nvidia_smi_q_error", OrNull(h.smi_error)},
          {"gpus_in_driver", h.gpus_in_driver},
          {"gpus", gpus},
          {"nvswitch_devices", h.nvswitch_devices},
          {"fabric_manager", OrNull(h.fabric_manager)},
          {"kernel_log", OrNull(h.kernel_log)},
          {"kernel_log_error", OrNull(h.kernel_log_error)},
          {"xid_lines", h.xid_lines_total},
          {"xids", xids},
          {"host_error_lines", h.host_error_lines_total},
          {"host_errors", host_errors},
          {"memory_error_counts", memory_errors},
          {"nvlink_errors", nvlink_errors},
          {"infiniband", ports},
          {"nic_pcie_errors", nic_pcie},
          {"nvidia_peermem",
           h.peermem.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.peermem == "yes")},
          {"pci_devices", pci},
          {"pci_acs_control", acs},
          {"swap_kib", NumberOrNull(h.swap_kib)},
          {"clocksource", OrNull(h.clocksource)},
          {"clocksources_available", OrNull(h.clocksources_available)},
          {"free_space", space},
          {"write_tests", writes},
          {"shared_memory", shm},
          {"neighbour_tables", neighbours},
          {"health_checks", checks},
          {"interfaces", interfaces},
          {"interface_env", h.interface_env}};
}

nlohmann::json NodeJson(const NodeFacts& n, const ClusterSpec& spec) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : n.gpus) {
    gpus.push_back({{"name", g.name}, {"memory_mib", g.memory_mib}, {"driver", g.driver}});
  }
  nlohmann::json facts = {
      {"hostname", OrNull(n.hostname)},
      {"os", OrNull(n.os)},
      {"kernel", OrNull(n.kernel)},
      {"cpus", n.cpus},
      {"mem_kib", n.mem_kib},
      {"shm_kib", n.shm_kib},
      {"disk_free_kib", n.disk_free_kib},
      {"workdir", OrNull(n.workdir)},
      {"workdir_exists", n.workdir_exists},
      {"nofile", n.nofile},
      {"memlock_kib",
       n.memlock_kib == -2 ? nlohmann::json(nullptr) : nlohmann::json(n.memlock_kib)},
      {"clock_offset_s", n.clock_known ? nlohmann::json(n.clock_offset_s) : nlohmann::json()},
      {"driver", VersionJson(n.driver)},
      {"driver_open_module", n.driver_open_module},
      {"gpus", gpus},
      {"gpus_from_proc", n.gpus_from_proc},
      {"nvidia_smi_error", OrNull(n.nvidia_smi_error)},
      {"cuda", VersionJson(n.cuda)},
      {"cuda_home", OrNull(n.cuda_home)},
      {"nvcc", VersionJson(n.nvcc)},
      {"nccl", VersionJson(n.Nccl())},
      {"nccl_header", VersionJson(n.nccl_header)},
      {"nccl_header_path", OrNull(n.nccl_header_path)},
      {"nccl_library", VersionJson(n.nccl_library)},
      {"nccl_library_path", OrNull(n.nccl_library_path)},
      {"python", OrNull(n.python)},
      {"python_version", VersionJson(n.python_version)},
      {"python_error", OrNull(n.python_error)},
      {"pythonpath_workdir", OrNull(n.pythonpath_workdir)},
      {"torch", VersionJson(n.torch)},
      {"torch_cuda", VersionJson(n.torch_cuda)},
      {"torch_nccl", VersionJson(n.torch_nccl)},
      {"torch_error", OrNull(n.torch_error)},
      {"horovod", VersionJson(n.horovod)},
      {"horovod_frameworks", OrNull(n.horovod_frameworks)},
      {"horovod_controllers", OrNull(n.horovod_controllers)},
      {"horovod_ops", OrNull(n.horovod_ops)},
      {"horovod_error", OrNull(n.horovod_error)},
      {"py_spy", OrNull(n.py_spy)},
      {"clip", VersionJson(n.clip)},
      {"clip_path", OrNull(n.clip_path)},
      {"clip_error", OrNull(n.clip_error)},
      {"rendezvous", OrNull(n.rendezvous)},
      {"rendezvous_detail", OrNull(n.rendezvous_detail)},
      {"health", HealthJson(n.health, spec)},
  };
  return {{"host", n.host},
          {"address", n.address},
          {"slots", n.slots},
          {"reached", n.reached},
          {"failure", n.reached ? nlohmann::json() : nlohmann::json(ReachFailureName(n.failure))},
          {"error", OrNull(n.error)},
          {"probe_s", n.probe_seconds},
          {"facts", facts}};
}

}  // namespace

int DoctorExitStatus(const std::vector<Finding>& findings) {
  return WorstSeverity(findings) == Severity::kError ? 1 : 0;
}

std::string RenderTextReport(const ClusterSpec& spec, const ProbeRun& run,
                             const std::vector<Finding>& findings, bool colour) {
  bool marked = false;
  std::string out = RenderTable(run, findings, colour, &marked);
  if (marked) out += "(* differs from the other nodes or fails a check; see below)\n";
  out += "\n";
  int errors = 0, warnings = 0;
  for (const auto& f : findings) {
    std::string tag = fmt::format("{:<7}", SeverityName(f.severity));
    if (colour) tag = SeverityColour(f.severity) + tag + kReset;
    out += fmt::format("{} {}\n", tag, f.message);
    if (!f.remedy.empty()) out += fmt::format("        -> {}\n", f.remedy);
    errors += f.severity == Severity::kError;
    warnings += f.severity == Severity::kWarning;
  }
  out += fmt::format("\n{} nodes, {} errors, {} warnings ({:.2f} s, {})\n", run.nodes.size(),
                     errors, warnings, run.wall_s,
                     spec.source.empty() ? TransportName(spec.transport) : spec.source);
  return out;
}

std::string RenderJsonReport(const ClusterSpec& spec, const ProbeRun& run,
                             const std::vector<Finding>& findings) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : run.nodes) nodes.push_back(NodeJson(n, spec));
  nlohmann::json list = nlohmann::json::array();
  int counts[3] = {0, 0, 0};
  for (const auto& f : findings) {
    list.push_back({{"severity", SeverityName(f.severity)},
                    {"check", f.check},
                    {"fact", OrNull(f.fact)},
                    {"nodes", f.nodes},
                    {"message", f.message},
                    {"remedy", OrNull(f.remedy)}});
    ++counts[static_cast<int>(f.severity)];
  }
  nlohmann::json doc = {
      {"cluster",
       {{"name", OrNull(spec.name)},
        {"file", OrNull(spec.source)},
        {"transport", TransportName(spec.transport)}}},
      {"rendezvous",
       {{"master_addr", run.master_addr},
        {"master_port", run.master_port},
        {"listening", run.listener.started},
        {"error", OrNull(run.listener.error)}}},
      {"nodes", nodes},
      {"findings", list},
      {"summary",
       {{"ok", counts[0]},
        {"warnings", counts[1]},
        {"errors", counts[2]},
        {"exit_status", DoctorExitStatus(findings)},
        {"wall_s", run.wall_s}}},
  };
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace dtrain
