// nvidia-smi outputs for the doctor's health tests, built from the formats recorded on a real H100
// (tests/fixtures/h100-node/): the recorded `-q` as it is (the healthy case) or with fields edited
// (a fault per rule), the same for an 8-GPU HGX H100 node (8 GPU blocks with distinct bus ids,
// NV18 between every pair in `topo -m`, 18 links per GPU at 26.562 GB/s in `nvlink -s`), and the
// probe lines the node probe makes of them (templates/probe.sh).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/support/test_paths.h"

namespace dtrain::test {

inline std::string FixtureText(const std::string& name) {
  std::ifstream in(std::string(DTRAIN_SOURCE_DIR) + "/tests/fixtures/h100-node/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

inline std::string Trimmed(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The recorded `nvidia-smi -q` of one H100 80GB HBM3 (bus id 00000000:00:06.0).
inline std::string RecordedQuery() {
  return FixtureText("nvidia-smi-q.txt");
}
inline std::string RecordedTopology() {
  return FixtureText("nvidia-smi-topo.txt");
}

// `query` with the value of `key` under `sections` ("Remapped Rows", "PCI/GPU Link Info/Link
// Width"; "" for a GPU's own field) changed to `value`, in GPU block `gpu` (0 = the first).
// Unchanged when the field is not there (the caller's test then fails on its expectation).
inline std::string WithField(const std::string& query, int gpu, const std::string& sections,
                             const std::string& key, const std::string& value) {
  std::vector<std::string> lines = SplitLines(query);
  size_t i = 0;
  for (int seen = -1; i < lines.size(); ++i) {
    if (lines[i].rfind("GPU ", 0) == 0 && ++seen == gpu) break;
  }
  std::istringstream path(sections);
  for (std::string section; std::getline(path, section, '/');) {
    while (i < lines.size() && Trimmed(lines[i]) != section) ++i;
  }
  for (; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(": ");
    if (colon == std::string::npos || Trimmed(lines[i].substr(0, colon)) != key) continue;
    lines[i] = lines[i].substr(0, colon + 2) + value;
    break;
  }
  return JoinLines(lines);
}

// Replaces the first line of GPU block `gpu` that reads `line` once its padding is squeezed
// ("Processes: None", "Fabric") with `replacement` (which may be several lines).
inline std::string WithLine(const std::string& query, int gpu, const std::string& line,
                            const std::string& replacement) {
  std::vector<std::string> lines = SplitLines(query);
  int seen = -1;
  for (std::string& text : lines) {
    if (text.rfind("GPU ", 0) == 0) ++seen;
    if (seen != gpu) continue;
    const size_t colon = text.find(": ");
    const std::string squeezed =
        colon == std::string::npos
            ? Trimmed(text)
            : Trimmed(text.substr(0, colon)) + ": " + Trimmed(text.substr(colon + 2));
    if (squeezed == line) {
      text = replacement;
      break;
    }
  }
  return JoinLines(lines);
}

// The bus ids of an HGX H100 8-GPU baseboard.
inline std::vector<std::string> HgxBusIds() {
  return {"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
          "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"};
}

// `nvidia-smi -q` of an 8-GPU HGX H100 node: the recorded GPU block 8 times with the bus ids
// above, each GPU's fabric registered with Fabric Manager (State Completed, Status Success).
inline std::string HgxQuery() {
  const std::string recorded = RecordedQuery();
  const size_t block = recorded.find("\nGPU 00000000:00:06.0\n") + 1;
  std::string head = recorded.substr(0, block);
  head.replace(head.find("Attached GPUs"),
               head.find('\n', head.find("Attached GPUs")) - head.find("Attached GPUs"),
               "Attached GPUs                                          : 8");
  std::string out = head;
  const std::vector<std::string> ids = HgxBusIds();
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string gpu = recorded.substr(block);
    for (size_t at; (at = gpu.find("00000000:00:06.0")) != std::string::npos;) {
      gpu.replace(at, 16, ids[i]);
    }
    gpu = WithField(gpu, 0, "PCI", "Bus", "0x" + ids[i].substr(9, 2));
    gpu = WithField(gpu, 0, "PCI", "Device", "0x00");
    gpu = WithField(gpu, 0, "", "Minor Number", std::to_string(i));
    gpu = WithField(gpu, 0, "Fabric", "State", "Completed");
    gpu = WithField(gpu, 0, "Fabric", "Status", "Success");
    out += gpu;
    if (out.back() != '\n') out += "\n";
    if (i + 1 < ids.size()) out += "\n";
  }
  return out;
}

// `nvidia-smi topo -m` of `gpus` GPUs with NV18 between every pair.
inline std::string HgxTopology(int gpus = 8) {
  std::string out = "\t\033[4m";
  for (int i = 0; i < gpus; ++i) out += "GPU" + std::to_string(i) + "\t";
  out += "CPU Affinity\tNUMA Affinity\tGPU NUMA ID\033[0m\n";
  for (int i = 0; i < gpus; ++i) {
    out += "GPU" + std::to_string(i);
    for (int j = 0; j < gpus; ++j) out += i == j ? "\t X " : "\tNV18";
    out += i < gpus / 2 ? "\t0-55,112-167\t0\t\tN/A\n" : "\t56-111,168-223\t1\t\tN/A\n";
  }
  const std::string recorded = RecordedTopology();
  return out + recorded.substr(recorded.find("\nLegend:"));
}

// `nvidia-smi nvlink -s`: `links` links per GPU at 26.562 GB/s, those in `inactive` (GPU, link)
// shown as <inactive>.
// The line `nvidia-smi nvlink` prints above GPU `g`'s links.
inline std::string NvlinkGpuLine(int g) {
  return "GPU " + std::to_string(g) +
         ": NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-1111-2222-3333-" + std::string(11, '4') +
         std::to_string(g) + ")\n";
}

inline std::string NvlinkStatus(int gpus = 8, int links = 18,
                                const std::vector<std::pair<int, int>>& inactive = {}) {
  std::string out;
  for (int g = 0; g < gpus; ++g) {
    out += NvlinkGpuLine(g);
    for (int l = 0; l < links; ++l) {
      bool down = false;
      for (const auto& [dg, dl] : inactive) down = down || (dg == g && dl == l);
      out += "\t Link " + std::to_string(l) + ": " + (down ? "<inactive>" : "26.562 GB/s") + "\n";
    }
  }
  return out;
}

// What `nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader` prints
// for `gpus` H100s.
inline std::string GpuListCsv(int gpus) {
  std::string out;
  for (int i = 0; i < gpus; ++i) out += "NVIDIA H100 80GB HBM3, 81559 MiB, 580.159.04\n";
  return out;
}

// Probe lines (templates/probe.sh) carrying these outputs: `key=` before every line, and for
// `-q` the padding before the colons squeezed as the probe's sed does.
inline std::string ProbeLines(const std::string& key, const std::string& text) {
  std::string out;
  for (std::string line : SplitLines(text)) {
    if (key == "smi_q") {
      const size_t colon = line.find(": ");
      if (colon != std::string::npos) {
        size_t start = colon;
        while (start > 0 && (line[start - 1] == ' ' || line[start - 1] == '\t')) --start;
        if (start > 0) line = line.substr(0, start) + line.substr(colon);
      }
    }
    if (key == "smi_topo" && line.rfind("Legend:", 0) == 0) break;
    out += key + "=" + line + "\n";
  }
  return out;
}

// The probe's lines for a GPU node with these nvidia-smi outputs (gpu=, smi_q=, smi_topo=,
// smi_nvlink=), Fabric Manager in state `fabric_manager` and the kernel log holding `kernel`
// (dmesg's lines).
// `nvidia-smi nvlink -e` of `gpus` GPUs with `links` links each, every counter 0 but those in
// `counts` ({gpu, link, "Recovery Errors"} -> value). Not recorded: the recorded node has no
// NVLink; the layout is the one shown for an H100 in Stas Bekman's ML Engineering book (a GPU
// line as in `nvlink -s`, then "Link N: Replay Errors: 0", "Recovery Errors", "CRC Errors").
inline std::string NvlinkErrors(
    int gpus = 8, int links = 18,
    const std::vector<std::pair<std::tuple<int, int, std::string>, long long>>& counts = {}) {
  std::string out;
  for (int g = 0; g < gpus; ++g) {
    out += NvlinkGpuLine(g);
    for (int l = 0; l < links; ++l) {
      for (const char* counter : {"Replay Errors", "Recovery Errors", "CRC Errors"}) {
        long long value = 0;
        for (const auto& [at, v] : counts) {
          if (at == std::make_tuple(g, l, std::string(counter))) value = v;
        }
        out +=
            "\t Link " + std::to_string(l) + ": " + counter + ": " + std::to_string(value) + "\n";
      }
    }
  }
  return out;
}

inline std::string GpuProbeLines(int gpus, const std::string& query, const std::string& topology,
                                 const std::string& nvlink, const std::string& kernel = "",
                                 const std::string& fabric_manager = "active") {
  std::string out = ProbeLines("gpu", GpuListCsv(gpus));
  out += ProbeLines("smi_q", query) + ProbeLines("smi_topo", topology) +
         ProbeLines("smi_nvlink", nvlink);
  out += "nvswitch=no\nfabricmanager=" + fabric_manager + "\nkernel_log=dmesg\n";
  out += ProbeLines("xid_line", kernel);
  return out;
}

}  // namespace dtrain::test
