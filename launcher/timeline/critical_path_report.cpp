// How a critical path is named and reported: HTA's names of the bounds, what a stretch waits on,
// the summary's section and its JSON.
#include "launcher/timeline/critical_path.h"

#include <fmt/format.h>

namespace dtrain {

const char* PathBoundName(PathBound bound) {
  switch (bound) {
    case PathBound::kCpu:
      return "cpu_bound";
    case PathBound::kGpuCompute:
      return "gpu_compute_bound";
    case PathBound::kGpuCommunication:
      return "gpu_communication_bound";
    case PathBound::kKernelGap:
      return "gpu_kernel_kernel_overhead";
    case PathBound::kLaunchDelay:
      return "gpu_kernel_launch_overhead";
  }
  return "";
}

std::string PathWaitText(PathBound bound, const std::string& name) {
  switch (bound) {
    case PathBound::kKernelGap:
      return "stream idle after " + name;
    case PathBound::kLaunchDelay:
      return "launch of " + name;
    case PathBound::kCpu:
    case PathBound::kGpuCompute:
    case PathBound::kGpuCommunication:
      break;
  }
  return name;
}

namespace {

std::string Share(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100.0 * part / whole) : "-";
}

std::string StretchText(const PathStretch& s) {
  const std::string name = s.name.size() > 60 ? s.name.substr(0, 57) + "..." : s.name;
  std::string what = PathWaitText(s.bound, name);
  if (s.bound == PathBound::kCpu) what += " (CPU)";
  if (s.bound == PathBound::kGpuCompute || s.bound == PathBound::kGpuCommunication) {
    what += " (GPU)";
  }
  return s.count > 1 ? fmt::format("{} {:.2f} ms ({}x)", what, s.us / 1000.0, s.count)
                     : fmt::format("{} {:.2f} ms", what, s.us / 1000.0);
}

}  // namespace

std::string FormatCriticalPaths(const std::vector<RankCriticalPath>& paths) {
  std::string out =
      "critical path of one step per rank (what set the step's length; HTA's critical path "
      "analysis):\n";
  out += fmt::format("{:>4}  {:<16} {:>8} {:>8} {:>6} {:>11} {:>8} {:>11} {:>9}\n", "rank", "step",
                     "step_ms", "path_ms", "cpu", "gpu-compute", "gpu-comm", "kernel-gaps",
                     "launches");
  bool sync_events = false;
  std::vector<std::string> notes;
  for (const RankCriticalPath& p : paths) {
    sync_events |= p.sync_events;
    if (!p.note.empty()) {
      notes.push_back(fmt::format("rank {}: {}", p.rank, p.note));
      continue;
    }
    const auto& b = p.bound_us;
    out += fmt::format("{:>4}  {:<16} {:>8.2f} {:>8.2f} {:>6} {:>11} {:>8} {:>11} {:>9}\n", p.rank,
                       p.step, p.step_us / 1000.0, p.path_us / 1000.0, Share(b[0], p.path_us),
                       Share(b[1], p.path_us), Share(b[2], p.path_us), Share(b[3], p.path_us),
                       Share(b[4], p.path_us));
  }
  for (const RankCriticalPath& p : paths) {
    if (!p.note.empty() || p.stretches.empty()) continue;
    out += fmt::format("rank {}: longest on the path: ", p.rank);
    for (size_t i = 0; i < p.stretches.size() && i < 4; ++i) {
      out += (i ? "; " : "") + StretchText(p.stretches[i]);
    }
    out += '\n';
  }
  for (const std::string& note : notes) out += note + '\n';
  if (!sync_events) {
    out +=
        "(the traces hold no CUDA synchronisation events, so a CPU waiting on the GPU is not "
        "followed onto it; record them with torch.profiler's "
        "experimental_config=torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True))"
        "\n";
  }
  return out;
}

nlohmann::json CriticalPathsJson(const std::vector<RankCriticalPath>& paths) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankCriticalPath& p : paths) {
    nlohmann::json r = {{"rank", p.rank}, {"steps", p.steps}};
    if (!p.note.empty()) {
      r["note"] = p.note;
      out.push_back(std::move(r));
      continue;
    }
    r["step"] = p.step;
    r["step_index"] = p.step_index;
    r["step_ms"] = p.step_us / 1000.0;
    r["path_ms"] = p.path_us / 1000.0;
    nlohmann::json bound = nlohmann::json::object();
    for (size_t i = 0; i < kPathBounds; ++i) {
      bound[PathBoundName(static_cast<PathBound>(i))] = p.bound_us[i] / 1000.0;
    }
    r["bound_by_ms"] = std::move(bound);
    nlohmann::json stretches = nlohmann::json::array();
    for (const PathStretch& s : p.stretches) {
      stretches.push_back({{"name", s.name},
                           {"bound_by", PathBoundName(s.bound)},
                           {"ms", s.us / 1000.0},
                           {"count", s.count}});
    }
    r["longest"] = std::move(stretches);
    r["nodes"] = p.nodes;
    r["edges"] = p.edges;
    r["sync_events"] = p.sync_events;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace dtrain
