// nvidia-smi's -q, topo -m and nvlink -s texts -> per-GPU structs. `-q` is a tree written with
// indentation (4 spaces a level) of "Key : Value" lines and section names; a field is named by
// its sections and key, "Remapped Rows/Pending".
#include "doctor/nvidia_smi_report.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>

#include "doctor/tool_output_text.h"

namespace dtrain {
namespace {

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
  }
  return lines;
}

// The leading number of "16x", "81559 MiB", "5"; -1 when there is none.
long long LeadingNumber(std::string_view s) {
  s = TrimSpace(s);
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return -1;
  return std::strtoll(std::string(s).c_str(), nullptr, 10);
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// One GPU's fields by "Section/Sub/Key" (the first occurrence), and its processes in order.
struct GpuBlock {
  std::map<std::string, std::string> fields;
  std::vector<GpuProcess> processes;
};

std::string Field(const GpuBlock& b, const std::string& path) {
  auto it = b.fields.find(path);
  return it == b.fields.end() ? "" : it->second;
}

// The first of `paths` the report has.
std::string FirstField(const GpuBlock& b, std::initializer_list<const char*> paths) {
  for (const char* path : paths) {
    std::string v = Field(b, path);
    if (!v.empty()) return v;
  }
  return "";
}

// "700.00 W" -> 700; -1 for "N/A" or nothing.
double Watts(std::string_view s) {
  s = TrimSpace(s);
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return -1;
  return std::strtod(std::string(s).c_str(), nullptr);
}

// Drivers before 535 call the clock-event reasons "Clocks Throttle Reasons".
std::string ClockReason(const GpuBlock& b, const std::string& reason) {
  std::string v = Field(b, "Clocks Event Reasons/" + reason);
  return v.empty() ? Field(b, "Clocks Throttle Reasons/" + reason) : v;
}

GpuHealth ToGpuHealth(const GpuBlock& b, int index, std::string bus_id) {
  GpuHealth g;
  g.index = index;
  g.bus_id = std::move(bus_id);
  g.name = Field(b, "Product Name");
  g.persistence_mode = Field(b, "Persistence Mode");
  g.recovery_action = Field(b, "GPU Recovery Action");
  g.mig_current = Field(b, "MIG Mode/Current");
  g.mig_pending = Field(b, "MIG Mode/Pending");
  g.virtualization_mode = Field(b, "GPU Virtualization Mode/Virtualization Mode");
  g.ecc_current = Field(b, "ECC Mode/Current");
  g.ecc_pending = Field(b, "ECC Mode/Pending");
  for (const auto& [path, value] : b.fields) {
    if (!StartsWith(path, "ECC Errors/Volatile/")) continue;
    const std::string key = path.substr(20);
    const long long n = LeadingNumber(value);
    if (n < 0) continue;
    if (key == "DRAM Uncorrectable") g.dram_uncorrectable = n;
    if (StartsWith(key, "SRAM Uncorrectable")) {
      g.sram_uncorrectable = (g.sram_uncorrectable < 0 ? 0 : g.sram_uncorrectable) + n;
    }
  }
  g.remapped_rows_pending = Field(b, "Remapped Rows/Pending");
  g.remapping_failure = Field(b, "Remapped Rows/Remapping Failure Occurred");
  g.retired_pages_pending = Field(b, "Retired Pages/Pending Page Blacklist");
  const std::string link = "PCI/GPU Link Info/";
  g.pcie_gen_max = static_cast<int>(LeadingNumber(Field(b, link + "PCIe Generation/Max")));
  g.pcie_gen_current = static_cast<int>(LeadingNumber(Field(b, link + "PCIe Generation/Current")));
  g.pcie_width_max = static_cast<int>(LeadingNumber(Field(b, link + "Link Width/Max")));
  g.pcie_width_current = static_cast<int>(LeadingNumber(Field(b, link + "Link Width/Current")));
  g.pcie_replays = LeadingNumber(Field(b, "PCI/Replays Since Reset"));
  g.pcie_replay_rollovers = LeadingNumber(Field(b, "PCI/Replay Number Rollovers"));
  g.idle = ClockReason(b, "Idle") == "Active";
  for (const char* reason : {"HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown"}) {
    if (ClockReason(b, reason) == "Active") g.hw_slowdowns.push_back(reason);
  }
  // Drivers before 535 have "Power Readings" with "Power Limit" (or "Enforced Power Limit").
  g.power_limit_w = Watts(FirstField(b, {"GPU Power Readings/Current Power Limit",
                                         "Power Readings/Enforced Power Limit",
                                         "Power Readings/Power Limit"}));
  g.default_power_limit_w = Watts(
      FirstField(b, {"GPU Power Readings/Default Power Limit", "Power Readings/Default Power Limit"}));
  g.app_clock_mhz = LeadingNumber(Field(b, "Applications Clocks/Graphics"));
  g.default_app_clock_mhz = LeadingNumber(Field(b, "Default Applications Clocks/Graphics"));
  g.fb_used_mib = LeadingNumber(Field(b, "FB Memory Usage/Used"));
  g.fb_total_mib = LeadingNumber(Field(b, "FB Memory Usage/Total"));
  g.processes = b.processes;
  g.fabric_state = Field(b, "Fabric/State");
  g.fabric_status = Field(b, "Fabric/Status");
  return g;
}

}  // namespace

NvidiaSmiReport ParseNvidiaSmiQuery(std::string_view text) {
  NvidiaSmiReport report;
  std::vector<std::pair<std::string, GpuBlock>> blocks;  // bus id, fields
  std::vector<std::string> sections;                     // below the GPU line, by depth
  for (std::string_view raw : Lines(text)) {
    const std::string_view line = TrimSpace(raw);
    if (line.empty() || StartsWith(line, "=")) continue;
    const size_t indent = raw.find_first_not_of(' ');
    const size_t depth = indent / 4;  // 0: top level; 1: a GPU's own fields
    if (depth == 0 && StartsWith(line, "GPU ") && line.find(" : ") == std::string_view::npos &&
        line.find(": ") == std::string_view::npos) {
      blocks.emplace_back(std::string(TrimSpace(line.substr(4))), GpuBlock{});
      sections.clear();
      continue;
    }
    size_t colon = line.find(": ");
    std::string_view key, value;
    bool pair = true;
    if (colon != std::string_view::npos) {
      key = TrimSpace(line.substr(0, colon));
      value = TrimSpace(line.substr(colon + 2));
    } else if (line.back() == ':') {
      key = TrimSpace(line.substr(0, line.size() - 1));
    } else {
      pair = false;
    }
    if (depth == 0) {
      if (key == "Driver Version") report.driver = std::string(value);
      if (key == "Attached GPUs") report.attached = static_cast<int>(LeadingNumber(value));
      continue;
    }
    if (blocks.empty()) continue;
    GpuBlock& block = blocks.back().second;
    // A line at depth d sits below the first d-1 sections open (a key line can have children
    // too: "HW Thermal Slowdown" is indented below "HW Slowdown").
    if (sections.size() > depth - 1) sections.resize(depth - 1);
    std::string path;
    for (const std::string& s : sections) path += s + "/";
    if (!pair) {
      sections.resize(depth - 1);
      sections.emplace_back(line);
      continue;
    }
    if (!sections.empty() && sections.front() == "Processes") {
      if (key == "Process ID") block.processes.push_back({LeadingNumber(value), "", -1});
      if (!block.processes.empty() && key == "Name") block.processes.back().name = value;
      if (!block.processes.empty() && key == "Used GPU Memory") {
        block.processes.back().used_mib = LeadingNumber(value);
      }
    }
    block.fields.emplace(path + std::string(key), std::string(value));
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    report.gpus.push_back(ToGpuHealth(blocks[i].second, static_cast<int>(i), blocks[i].first));
  }
  return report;
}

std::vector<int> ParseTopologyNvlinkPeers(std::string_view text) {
  auto cells = [](std::string_view line) {
    std::string clean;  // without the ANSI underline nvidia-smi puts around the header
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == '\033') {
        while (i < line.size() && line[i] != 'm') ++i;
        continue;
      }
      clean += line[i];
    }
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
      size_t tab = clean.find('\t', start);
      out.emplace_back(TrimSpace(std::string_view(clean).substr(start, tab - start)));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    return out;
  };
  std::vector<size_t> gpu_columns;
  std::vector<int> peers;
  for (std::string_view line : Lines(text)) {
    std::vector<std::string> row = cells(line);
    if (gpu_columns.empty()) {
      for (size_t c = 1; c < row.size(); ++c) {
        if (StartsWith(row[c], "GPU") && row[c].size() > 3 &&
            std::isdigit(static_cast<unsigned char>(row[c][3]))) {
          gpu_columns.push_back(c);
        }
      }
      continue;
    }
    if (!StartsWith(row[0], "GPU") || row[0].size() < 4 ||
        !std::isdigit(static_cast<unsigned char>(row[0][3]))) {
      continue;
    }
    int n = 0;
    for (size_t c : gpu_columns) {
      if (c < row.size() && StartsWith(row[c], "NV")) ++n;
    }
    peers.push_back(n);
  }
  return peers;
}

std::vector<GpuNvlinks> ParseNvlinkStatus(std::string_view text) {
  std::vector<GpuNvlinks> out;
  for (std::string_view raw : Lines(text)) {
    const std::string_view line = TrimSpace(raw);
    if (StartsWith(line, "GPU ")) {
      GpuNvlinks g;
      g.gpu = static_cast<int>(LeadingNumber(line.substr(4)));
      out.push_back(g);
    } else if (StartsWith(line, "Link ") && !out.empty()) {
      const size_t colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      const int link = static_cast<int>(LeadingNumber(line.substr(5, colon - 5)));
      if (line.find("<inactive>", colon) != std::string_view::npos) {
        out.back().inactive.push_back(link);
      } else {
        ++out.back().active;
      }
    }
  }
  return out;
}

std::vector<NvlinkErrorCount> ParseNvlinkErrors(std::string_view text) {
  std::vector<NvlinkErrorCount> out;
  int gpu = -1;
  for (std::string_view raw : Lines(text)) {
    const std::string_view line = TrimSpace(raw);
    if (StartsWith(line, "GPU ")) {
      gpu = static_cast<int>(LeadingNumber(line.substr(4)));
      continue;
    }
    if (!StartsWith(line, "Link ") || gpu < 0) continue;
    // "Link 3: Replay Errors: 0"
    const size_t first = line.find(": ");
    const size_t second = first == std::string_view::npos ? first : line.find(": ", first + 2);
    if (second == std::string_view::npos) continue;
    const long long link = LeadingNumber(line.substr(5, first - 5));
    const long long count = CountOrMinusOne(TrimSpace(line.substr(second + 2)));
    if (link < 0 || count < 0) continue;
    out.push_back({gpu, static_cast<int>(link),
                   std::string(TrimSpace(line.substr(first + 2, second - first - 2))), count});
  }
  return out;
}

std::string PciDeviceKey(std::string_view bus_id) {
  bus_id = TrimSpace(bus_id);
  if (StartsWith(bus_id, "PCI:")) bus_id.remove_prefix(4);
  std::vector<std::string_view> parts;
  while (true) {
    size_t colon = bus_id.find(':');
    parts.push_back(bus_id.substr(0, colon));
    if (colon == std::string_view::npos) break;
    bus_id.remove_prefix(colon + 1);
  }
  if (parts.size() != 3) return "";
  std::string_view device = parts[2].substr(0, parts[2].find('.'));
  unsigned long values[3];
  std::string_view fields[3] = {parts[0], parts[1], device};
  for (int i = 0; i < 3; ++i) {
    if (fields[i].empty()) return "";
    for (char c : fields[i]) {
      if (!std::isxdigit(static_cast<unsigned char>(c))) return "";
    }
    values[i] = std::strtoul(std::string(fields[i]).c_str(), nullptr, 16);
  }
  char key[32];
  std::snprintf(key, sizeof key, "%04lx:%02lx:%02lx", values[0], values[1], values[2]);
  return key;
}

}  // namespace dtrain
