// Tick: poll the probe in flight; when it ends, note who progressed; when a rank has been idle
// for the timeout, probe once more with stacks and write the report.
#include "launcher/hangs/stall_watch.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/file_replace.h"
#include "launcher/log_reader.h"
#include "launcher/rank_log.h"
#include "runtime/trace/heartbeat_vocabulary.h"

namespace dtrain {
namespace {

// CPU counts as progress above this share of one core (a process blocked in a collective
// still wakes up now and then; a computing one uses a whole core).
constexpr double kBusyShare = 0.05;
constexpr double kMinCpuStep_s = 0.03;   // three clock ticks
constexpr double kProbeDeadline_s = 20;  // py-spy is given 10 s per process

std::string Get(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

}  // namespace

double StallWatch::ProbeInterval(double timeout_s) {
  return std::clamp(timeout_s / 5, 0.5, 30.0);
}

StallWatch::StallWatch(const ClusterSpec& spec, const RankPlan& plan, StallWatchOptions options)
    : spec_(spec), options_(std::move(options)) {
  const Clock::time_point now = Clock::now();
  for (const RankSlot& slot : plan.ranks) {
    RankProgress& p = ranks_[slot.rank];
    p.host = slot.host;
    p.last_progress = now;
    p.cpu_at = now;
  }
  next_probe_ = now + std::chrono::milliseconds(500);
  if (options_.straggler_factor > 0)
    stragglers_ = std::make_unique<StragglerWatch>(options_.straggler_factor);
}

std::optional<Straggler> StallWatch::TakeStraggler() {
  return stragglers_ ? stragglers_->Take() : std::nullopt;
}

void StallWatch::OnOutput(int rank) {
  auto it = ranks_.find(rank);
  // dtrain-clip's own stall warnings are output too: its heartbeat is what counts there.
  if (it != ranks_.end() && !it->second.has_heartbeat) it->second.last_progress = Clock::now();
}

void StallWatch::OnExit(int rank, const ExitStatus& status) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  it->second.ended = true;
  it->second.exit = status.Describe();
}

void StallWatch::OnRestart(int rank) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  RankProgress fresh;
  fresh.host = it->second.host;
  fresh.last_progress = fresh.cpu_at = Clock::now();
  it->second = fresh;
}

double StallWatch::IdleSeconds(const RankProgress& p, Clock::time_point now) const {
  return std::chrono::duration<double>(now - p.last_progress).count();
}

void StallWatch::Observe(const ProbeResult& result, Clock::time_point now) {
  std::map<int, StepSample> steps;  // for the straggler watch
  for (auto& [rank, p] : ranks_) {
    auto found = result.ranks.find(rank);
    if (p.ended || found == result.ranks.end() || found->second.processes.empty()) continue;
    const RankFacts& f = found->second;
    bool computing = true;
    if (!f.heartbeat.empty()) {
      p.has_heartbeat = true;
      const std::string key = Get(f.heartbeat, heartbeat::kStep) + "|" +
                              Get(f.heartbeat, heartbeat::kActivity) + "|" +
                              Get(f.heartbeat, heartbeat::kCollectiveSeq) + "|" +
                              Get(f.heartbeat, heartbeat::kCollectiveState);
      if (key != p.heartbeat_key) {
        p.heartbeat_key = key;
        p.last_progress = now;
      }
      computing = Get(f.heartbeat, heartbeat::kCollectiveState) != heartbeat::kWaiting;
      const std::string step_s = Get(f.heartbeat, heartbeat::kStepSeconds);
      const std::string waited_s = Get(f.heartbeat, heartbeat::kStepWaitedSeconds);
      if (!step_s.empty() && !waited_s.empty()) {
        StepSample& s = steps[rank];
        s.host = p.host;
        s.step = std::atoll(Get(f.heartbeat, heartbeat::kStep).c_str());
        s.step_s = std::atof(step_s.c_str());
        s.waited_s = std::atof(waited_s.c_str());
      }
    }
    const double dt = std::chrono::duration<double>(now - p.cpu_at).count();
    const double used = f.cpu_s - p.cpu_s;
    if (!p.seen_cpu || used < 0) {
      p.seen_cpu = true;
    } else if (computing && used >= std::max(kMinCpuStep_s, kBusyShare * dt)) {
      p.last_progress = now;
    }
    p.cpu_s = f.cpu_s;
    p.cpu_at = now;
  }
  bool any_idle = false;
  for (auto& [rank, p] : ranks_)
    any_idle = any_idle || (!p.ended && IdleSeconds(p, now) >= options_.timeout_s);
  if (!any_idle) reported_ = false;  // progress resumed: the next stall is a new one
  if (stragglers_) stragglers_->Observe(steps, now);
}

std::optional<StallReport> StallWatch::Tick() {
  const Clock::time_point now = Clock::now();
  if (probe_) {
    if (!probe_->Poll(0)) return std::nullopt;
    ProbeResult result = probe_->result();
    const bool with_stacks = probe_with_stacks_;
    probe_.reset();
    if (with_stacks) {
      Observe(result, now);
      if (reported_) return std::nullopt;
      bool any_idle = false;
      for (auto& [rank, p] : ranks_)
        any_idle = any_idle || (!p.ended && IdleSeconds(p, now) >= options_.timeout_s);
      if (!any_idle) return std::nullopt;
      return Report(result, now);
    }
    Observe(result, now);
    bool any_idle = false;
    for (auto& [rank, p] : ranks_)
      any_idle = any_idle || (!p.ended && IdleSeconds(p, now) >= options_.timeout_s);
    if (any_idle && !reported_) {
      probe_ = std::make_unique<RankProbe>(
          spec_, ProbeRequest{options_.job_name, true, "", options_.job_dir}, kProbeDeadline_s);
      probe_with_stacks_ = true;
      probe_->Start();
    }
    return std::nullopt;
  }
  if (now < next_probe_) return std::nullopt;
  next_probe_ = now + std::chrono::milliseconds(
                          static_cast<long long>(ProbeInterval(options_.timeout_s) * 1000));
  probe_ = std::make_unique<RankProbe>(
      spec_, ProbeRequest{options_.job_name, false, "", options_.job_dir}, kProbeDeadline_s);
  probe_with_stacks_ = false;
  probe_->Start();
  return std::nullopt;
}

StallReport StallWatch::Report(const ProbeResult& result, Clock::time_point now) {
  std::vector<RankView> views;
  for (const auto& [rank, p] : ranks_) {
    RankView v;
    v.rank = rank;
    v.host = p.host;
    v.ended = p.ended;
    v.exit = p.exit;
    v.idle_s = IdleSeconds(p, now);
    std::vector<std::string> last = LastLines(RankLogPath(options_.job_dir, rank), 1);
    if (!last.empty()) v.last_line = last.back();
    auto found = result.ranks.find(rank);
    if (found != result.ranks.end() && !found->second.processes.empty()) v.facts = found->second;
    views.push_back(std::move(v));
  }
  StallReport report = MakeStallReport(views, options_.timeout_s, result.node_errors);
  reported_ = true;
  ++reports_;
  const std::string file = fmt::format("{}/stall-{}.txt", options_.job_dir, reports_);
  std::string written = fmt::format("stall report written to {}", file);
  std::string kept = file;  // the event's file: none when the disk refused it
  std::string refused;      // why the disk refused it
  if (options_.files) {
    options_.files->Replace(file, report.text, "the stall report", "");
    if (!options_.files->Flush(StallWatchOptions::kFileWaitS)) {
      written = fmt::format(
          "the stall report waits in memory for {}: a write to the job's folder has not "
          "returned in {:g} s (its drive hangs?); it is written once the drive answers",
          file, StallWatchOptions::kFileWaitS);
    } else {
      refused = options_.files->Refused(file);
    }
  } else {
    try {
      ReplaceFile(file, report.text, "the stall report");
    } catch (const Error& e) {
      refused = e.what();
    }
  }
  if (!refused.empty()) {  // the console still gets the report
    written = fmt::format("warning: {}; it is on the console only", refused);
    kept.clear();
  }
  std::istringstream lines(report.text);
  std::string text;
  for (std::string line; std::getline(lines, line);) text += "dtrain: " + line + "\n";
  text += "dtrain: " + written + "\n";
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  if (options_.on_report) options_.on_report({WallMicros(), "stall", report.summary, kept});
  return report;
}

}  // namespace dtrain
