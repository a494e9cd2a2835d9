// The text and the JSON of the GPU summary (gpu_time_summary.h): the per-rank table of GPU time,
// the steps, then each analysis' own table in turn.
#include "launcher/timeline/gpu_time_summary.h"

#include <string>

#include <fmt/format.h>

#include "launcher/timeline/summary_numbers.h"

namespace dtrain {
namespace {

const char* KindName(GpuActivityKind kind) {
  switch (kind) {
    case GpuActivityKind::kCompute:
      return "compute";
    case GpuActivityKind::kCommunication:
      return "communication";
    case GpuActivityKind::kMemory:
      return "memcpy";
    case GpuActivityKind::kOther:
      return "other";
  }
  return "other";
}

// The per-rank table of GPU time.
std::string GpuTable(const GpuTimeSummary& summary) {
  std::string out;
  out += fmt::format("{:>5}  {:<12} {:>9} {:>16} {:>16} {:>16} {:>16} {:>9}\n", "rank", "host",
                     "span ms", "compute", "communication", "memcpy/memset", "idle", "overlap");
  auto cell = [](double ms, double span) {
    return fmt::format("{:.1f} ({:.1f}%)", ms, Percent(ms, span));
  };
  for (const RankGpuTime& r : summary.ranks) {
    const GpuTime& g = r.gpu;
    out +=
        fmt::format("{:>5}  {:<12} {:>9.1f} {:>16} {:>16} {:>16} {:>16} {:>9}\n", r.rank,
                    r.host.empty() ? "-" : r.host, g.span_ms, cell(g.compute_ms, g.span_ms),
                    cell(g.communication_ms, g.span_ms), cell(g.memcpy_ms, g.span_ms),
                    cell(g.idle_ms, g.span_ms),
                    g.overlap_pct < 0 ? std::string("-") : fmt::format("{:.1f}%", g.overlap_pct));
  }
  out +=
      "(communication: NCCL kernels not hidden behind compute; overlap: the share of them that "
      "is)\n";
  return out;
}

}  // namespace

std::string FormatGpuTimeSummary(const GpuTimeSummary& summary) {
  bool any_gpu = false;
  for (const RankGpuTime& r : summary.ranks) any_gpu = any_gpu || r.gpu.span_ms > 0;
  std::string out = any_gpu
                        ? "GPU time per rank (PyTorch profiler traces; % of the rank's GPU span)\n"
                        : "GPU time: none recorded (PyTorch traces of CPU activity only)\n";
  if (any_gpu) out += GpuTable(summary);
  bool any_steps = false;
  for (const RankGpuTime& r : summary.ranks) any_steps = any_steps || !r.steps.empty();
  if (any_steps) {
    out += fmt::format("\nSteps ({}): duration ms and GPU busy %, per rank\n", summary.step_name);
    for (const RankGpuTime& r : summary.ranks) {
      out += fmt::format("  rank {}:", r.rank);
      for (const GpuStep& s : r.steps) {
        out +=
            fmt::format("  {:.1f} ({:.0f}%)", s.duration_ms, Percent(s.gpu_busy_ms, s.duration_ms));
      }
      out += '\n';
    }
  }
  if (const std::string causes = FormatGpuIdleCauses(summary.idle_causes); !causes.empty()) {
    out += "\n" + causes;
  }
  if (const std::string queues = FormatLaunchQueues(summary.launch_queues); !queues.empty()) {
    out += "\n" + queues;
  }
  if (const std::string bandwidth = FormatMemoryBandwidth(summary.memory_bandwidth);
      !bandwidth.empty()) {
    out += "\n" + bandwidth;
  }
  if (const std::string breakdown = FormatGpuKernelBreakdown(summary.kernel_breakdown);
      !breakdown.empty()) {
    out += "\n" + breakdown;
  }
  if (const std::string aten = FormatAtenOpKernels(summary.aten_ops); !aten.empty()) {
    out += "\n" + aten;
  }
  if (const std::string stragglers =
          FormatCollectiveStragglers(summary.collectives, summary.stragglers);
      !stragglers.empty()) {
    out += "\n" + stragglers;
  }
  if (const std::string late = FormatLateNcclKernels(summary.late_gpus); !late.empty()) {
    out += "\n" + late;
  }
  std::map<int, std::string> hosts;
  for (const RankGpuTime& r : summary.ranks) hosts[r.rank] = r.host;
  if (const std::string speed = FormatGpuSpeed(summary.speeds, hosts); !speed.empty()) {
    out += "\n" + speed;
  }
  return out;
}

nlohmann::json GpuTimeSummaryJson(const GpuTimeSummary& summary) {
  using nlohmann::json;
  json ranks = json::array();
  for (const RankGpuTime& r : summary.ranks) {
    const GpuTime& g = r.gpu;
    json steps = json::array();
    for (const GpuStep& s : r.steps) {
      steps.push_back({{"name", s.name},
                       {"start_ms", Round3(s.start_ms)},
                       {"duration_ms", Round3(s.duration_ms)},
                       {"gpu_busy_ms", Round3(s.gpu_busy_ms)},
                       {"gpu_compute_ms", Round3(s.gpu_compute_ms)}});
    }
    ranks.push_back(
        {{"rank", r.rank},
         {"host", r.host},
         {"trace", "pytorch"},
         {"gpu",
          {{"span_ms", Round3(g.span_ms)},
           {"busy_ms", Round3(g.busy_ms)},
           {"compute_ms", Round3(g.compute_ms)},
           {"communication_ms", Round3(g.communication_ms)},
           {"communication_total_ms", Round3(g.communication_total_ms)},
           {"memcpy_ms", Round3(g.memcpy_ms)},
           {"other_ms", Round3(g.other_ms)},
           {"idle_ms", Round3(g.idle_ms)},
           {"activities", r.activities}}},
         {"overlap_pct", g.overlap_pct < 0 ? json(nullptr) : json(Round3(g.overlap_pct))},
         {"steps", steps}});
    if (auto causes = summary.idle_causes.find(r.rank); causes != summary.idle_causes.end()) {
      ranks.back().update(GpuIdleCausesJson(causes->second));
    }
    if (auto queues = summary.launch_queues.find(r.rank); queues != summary.launch_queues.end()) {
      ranks.back()["launch_queue"] = LaunchQueueJson(queues->second);
    }
    if (auto bandwidth = summary.memory_bandwidth.find(r.rank);
        bandwidth != summary.memory_bandwidth.end()) {
      ranks.back()["memory_bandwidth"] = MemoryBandwidthJson(bandwidth->second);
    }
    for (const RankSpeed& speed : summary.speeds) {
      if (speed.rank == r.rank) ranks.back()["speed"] = GpuSpeedJson(speed);
    }
  }
  json kernels = json::array();
  for (const KernelTotal& k : summary.top_kernels) {
    kernels.push_back({{"name", k.name},
                       {"kind", KindName(k.kind)},
                       {"count", k.count},
                       {"total_ms", Round3(k.total_ms)},
                       {"max_us", Round3(k.max_us)}});
  }
  return {{"step", summary.step_name},
          {"ranks", ranks},
          {"top_kernels", kernels},
          {"kernel_breakdown", GpuKernelBreakdownJson(summary.kernel_breakdown)},
          {"aten_op_kernels", AtenOpKernelsJson(summary.aten_ops)},
          {"collectives", CollectivesJson(summary.collectives)},
          {"stragglers", CollectiveStragglersJson(summary.stragglers)},
          {"late_nccl_kernels", LateNcclKernelsJson(summary.late_gpus)}};
}

}  // namespace dtrain
