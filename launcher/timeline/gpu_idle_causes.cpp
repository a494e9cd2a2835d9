// Follows HTA 0.5.0: BreakdownAnalysis._analyze_idle_time_for_stream (hta/analyzers/
// breakdown_analysis.py) and CudaKernelAnalysis.cuda_kernel_launch_stats (hta/analyzers/
// cuda_kernel_analysis.py), over the activities the temporal breakdown keeps.
#include "launcher/timeline/gpu_idle_causes.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "launcher/timeline/summary_numbers.h"

namespace dtrain {
namespace {

// A cause is pointed out where it is most of a stream's idle time, and that idle time is this
// share of the stream's span.
constexpr double kNotableIdle = 0.10;

std::string MsCell(double us, double whole_us) {
  return fmt::format("{:.1f} ({:.0f}%)", us / 1000.0, Percent(us, whole_us));
}

std::string CountCell(int64_t count, int64_t whole) {
  return fmt::format("{} ({:.0f}%)", count, Percent(static_cast<double>(count), whole));
}

// The streams of a rank that the table lists: those with the most GPU work.
std::vector<const StreamIdle*> ListedStreams(const std::vector<StreamIdle>& streams) {
  return ListedShares(streams, [](const StreamIdle& s) { return s.busy_us; });
}

std::string Listed(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  }
  return out;
}

// "rank 0 (streams 7 and 132) and rank 1 (stream 7)"
using StreamsByRank = std::map<int, std::vector<std::string>>;
std::string Where(const StreamsByRank& places) {
  std::vector<std::string> ranks;
  for (const auto& [rank, streams] : places) {
    ranks.push_back(
        fmt::format("rank {} (stream{} {})", rank, streams.size() > 1 ? "s" : "", Listed(streams)));
  }
  return Listed(ranks);
}

std::string IdleTable(const std::map<int, GpuIdleCauses>& by_rank) {
  std::string out = fmt::format(
      "GPU idle by cause, per stream (as HTA's idle time breakdown. host wait: the next activity "
      "was launched\nafter the last one ended; kernel wait: a gap under {:.0f} us; other: the "
      "stream waited on other work)\n",
      kKernelWaitUs);
  out += fmt::format("{:>5} {:>7} {:>11} {:>9} {:>14} {:>14} {:>14} {:>14}\n", "rank", "stream",
                     "activities", "span ms", "idle ms", "host wait", "kernel wait", "other");
  StreamsByRank host, kernel, other;
  for (const auto& [rank, causes] : by_rank) {
    const std::vector<const StreamIdle*> listed = ListedStreams(causes.streams);
    for (const StreamIdle* s : listed) {
      const double idle = s->idle_us();
      out += fmt::format("{:>5} {:>7} {:>11} {:>9.1f} {:>14} {:>14} {:>14} {:>14}\n", rank,
                         s->stream, s->activities, s->span_us / 1000.0, MsCell(idle, s->span_us),
                         MsCell(s->host_wait_us, idle), MsCell(s->kernel_wait_us, idle),
                         MsCell(s->other_us, idle));
      if (idle < kNotableIdle * s->span_us) continue;
      const std::string stream = std::to_string(s->stream);
      if (s->host_wait_us > idle / 2) host[rank].push_back(stream);
      if (s->kernel_wait_us > idle / 2) kernel[rank].push_back(stream);
      if (s->other_us > idle / 2) other[rank].push_back(stream);
    }
    if (causes.streams.size() > listed.size()) {
      out +=
          fmt::format("{:>5} (and {} stream(s) with less of the rank's GPU work; all in --json)\n",
                      rank, causes.streams.size() - listed.size());
    }
  }
  if (!host.empty()) {
    out += fmt::format(
        "Host wait is most of the idle time on {}: the CPU launched work later than the GPU could "
        "run it (the data loader, Python between kernels, a synchronisation such as .item()); "
        "CUDA graphs or a larger batch keep the GPU fed.\n",
        Where(host));
  }
  if (!kernel.empty()) {
    out += fmt::format(
        "Kernel wait is most of the idle time on {}: many short kernels run back to back; fusing "
        "them (torch.compile, fused optimizers) saves the gaps.\n",
        Where(kernel));
  }
  if (!other.empty()) {
    out += fmt::format(
        "Other waits are most of the idle time on {}: the stream waited on work elsewhere "
        "(another stream's event, a collective, a copy).\n",
        Where(other));
  }
  return out;
}

std::string LaunchTable(const std::map<int, GpuIdleCauses>& by_rank) {
  std::string out =
      "Kernel launches per rank (as HTA's CUDA kernel launch stats. delay: the activity's start "
      "less the end\nof the call that launched it)\n";
  out += fmt::format("{:>5} {:>9} {:>16} {:>13} {:>15} {:>13} {:>19}\n", "rank", "launches",
                     "delay median us", "delay max us",
                     fmt::format("delay >{:.0f} us", kLaunchDelayCutoffUs),
                     fmt::format("call >{:.0f} us", kLaunchCallCutoffUs), "shorter than call");
  int64_t driver = 0;
  std::vector<std::string> launch_bound;
  for (const auto& [rank, causes] : by_rank) {
    const KernelLaunches& l = causes.launches;
    if (l.launches == 0) continue;
    out += fmt::format("{:>5} {:>9} {:>16.1f} {:>13.1f} {:>15} {:>13} {:>19}\n", rank, l.launches,
                       l.delay_median_us, l.delay_max_us, CountCell(l.delayed, l.launches),
                       CountCell(l.slow_calls, l.launches),
                       CountCell(l.shorter_than_call, l.launches));
    driver += l.driver_launches;
    if (2 * l.shorter_than_call > l.launches) launch_bound.push_back(fmt::format("rank {}", rank));
  }
  if (driver > 0) {
    out += fmt::format(
        "(the launches include {} by the driver's cuLaunchKernel(Ex), which HTA 0.5 does not "
        "count)\n",
        driver);
  }
  if (!launch_bound.empty()) {
    out += fmt::format(
        "Most kernels of {} ran in less time than the CPU took to launch them: the launches set "
        "the pace there; CUDA graphs or fused kernels launch fewer.\n",
        Listed(launch_bound));
  }
  return out;
}

}  // namespace

std::vector<StreamIdle> IdleByStream(std::vector<LaunchedActivity> activities) {
  std::stable_sort(activities.begin(), activities.end(),
                   [](const LaunchedActivity& a, const LaunchedActivity& b) {
                     return a.stream != b.stream ? a.stream < b.stream : a.start < b.start;
                   });
  std::vector<StreamIdle> out;
  for (size_t i = 0; i < activities.size(); ++i) {
    const LaunchedActivity& a = activities[i];
    const bool first = i == 0 || activities[i - 1].stream != a.stream;
    if (first) out.push_back(StreamIdle{a.stream});
    StreamIdle& s = out.back();
    s.activities += 1;
    s.busy_us += a.end - a.start;
    if (first) continue;
    // As HTA: the previous activity in start order, its end, and the gap to this one's start
    // (negative where they overlap, and added as it is).
    const double previous_end = activities[i - 1].end;
    const double gap = a.start - previous_end;
    if (!std::isnan(a.launched_at) && a.launched_at > previous_end) {
      s.host_wait_us += gap;
    } else if (gap < kKernelWaitUs) {
      s.kernel_wait_us += gap;
    } else {
      s.other_us += gap;
    }
  }
  // Spans: first start to the last end, per stream.
  size_t at = 0;
  for (StreamIdle& s : out) {
    const double first_start = activities[at].start;
    double last_end = activities[at].end;
    for (int64_t k = 0; k < s.activities; ++k, ++at) {
      last_end = std::max(last_end, activities[at].end);
    }
    s.span_us = last_end - first_start;
  }
  return out;
}

KernelLaunches LaunchStats(const std::vector<LaunchedActivity>& activities) {
  KernelLaunches out;
  std::vector<double> delays;
  for (const LaunchedActivity& a : activities) {
    if (a.call == LaunchCallKind::kNone) continue;
    out.launches += 1;
    if (a.call == LaunchCallKind::kDriver) out.driver_launches += 1;
    const double delay = std::max(0.0, a.start - a.call_start - a.call_duration);
    delays.push_back(delay);
    out.delay_max_us = std::max(out.delay_max_us, delay);
    if (delay > kLaunchDelayCutoffUs) out.delayed += 1;
    if (a.call_duration > kLaunchCallCutoffUs) out.slow_calls += 1;
    if (a.end - a.start < a.call_duration) out.shorter_than_call += 1;
  }
  out.delay_median_us = Median(std::move(delays));
  return out;
}

GpuIdleCauses FindGpuIdleCauses(std::vector<LaunchedActivity> activities) {
  GpuIdleCauses causes;
  causes.launches = LaunchStats(activities);
  causes.streams = IdleByStream(std::move(activities));
  return causes;
}

std::string FormatGpuIdleCauses(const std::map<int, GpuIdleCauses>& by_rank) {
  bool any_stream = false, any_launch = false;
  for (const auto& [rank, causes] : by_rank) {
    any_stream = any_stream || !causes.streams.empty();
    any_launch = any_launch || causes.launches.launches > 0;
  }
  std::string out;
  if (any_stream) out += IdleTable(by_rank);
  if (any_launch) out += (out.empty() ? "" : "\n") + LaunchTable(by_rank);
  return out;
}

nlohmann::json GpuIdleCausesJson(const GpuIdleCauses& causes) {
  using nlohmann::json;
  json streams = json::array();
  for (const StreamIdle& s : causes.streams) {
    streams.push_back({{"stream", s.stream},
                       {"activities", s.activities},
                       {"span_ms", Round3(s.span_us / 1000.0)},
                       {"busy_ms", Round3(s.busy_us / 1000.0)},
                       {"idle_ms", Round3(s.idle_us() / 1000.0)},
                       {"host_wait_ms", Round3(s.host_wait_us / 1000.0)},
                       {"kernel_wait_ms", Round3(s.kernel_wait_us / 1000.0)},
                       {"other_ms", Round3(s.other_us / 1000.0)}});
  }
  const KernelLaunches& l = causes.launches;
  return {{"idle_by_stream", streams},
          {"launches",
           {{"launches", l.launches},
            {"driver_launches", l.driver_launches},
            {"delay_median_us", Round3(l.delay_median_us)},
            {"delay_max_us", Round3(l.delay_max_us)},
            {"delayed", l.delayed},
            {"slow_calls", l.slow_calls},
            {"shorter_than_call", l.shorter_than_call}}}};
}

}  // namespace dtrain
