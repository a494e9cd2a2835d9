// The stall watch of a running job: follows every rank's progress (dtrain-clip's heartbeat when
// the rank has one; otherwise output written and CPU time consumed, read on its node by the rank
// probe) and, when a rank made none for the stall timeout, probes every rank once more with
// Python stacks and writes the stall report (console, <job>/stall-N.txt, an event in job.json).
// The straggler watch reads the same probes.
// Driven from the job supervisor's loop; never blocks it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "launcher/cluster_spec.h"
#include "launcher/hangs/rank_probe.h"
#include "launcher/hangs/stall_report.h"
#include "launcher/hangs/straggler_watch.h"
#include "launcher/job_record.h"
#include "launcher/rank_plan.h"

namespace dtrain {

enum class OnStall { kReport, kStop };

struct StallWatchOptions {
  double timeout_s = 300;  // > 0
  OnStall on_stall = OnStall::kReport;
  // > 0: the straggler watch (straggler_watch.h) reads the same probes with this factor.
  double straggler_factor = 0;
  std::string job_name;
  std::string job_dir;
  // Called with every report made (after stall-N.txt is written, or handed to `files`), e.g. to
  // add it to job.json.
  std::function<void(const JobEvent&)> on_report;
  // Writes stall-N.txt, so that a drive that hangs under the job's folder holds the report, not
  // the watch (job_file_writer.h); null: written by the watch.
  JobFileWriter* files = nullptr;
  // How long a report waits for `files` to write it before the watch goes on.
  static constexpr double kFileWaitS = 0.5;
};

class StallWatch {
 public:
  using Clock = std::chrono::steady_clock;

  StallWatch(const ClusterSpec& spec, const RankPlan& plan, StallWatchOptions options);

  void OnOutput(int rank);
  void OnExit(int rank, const ExitStatus& status);
  // A rank that ended runs again (it rejoined an elastic job): watched afresh from now.
  void OnRestart(int rank);
  // Moves the watch on; returns the report when one was just made.
  std::optional<StallReport> Tick();
  // A rank the straggler watch just named, once (none without straggler_factor).
  std::optional<Straggler> TakeStraggler();

  OnStall on_stall() const { return options_.on_stall; }
  double timeout_s() const { return options_.timeout_s; }

  // Seconds between probes: often enough to see a stall soon after the timeout, rarely enough
  // to cost nothing on a long timeout.
  static double ProbeInterval(double timeout_s);

 private:
  struct RankProgress {
    std::string host;
    Clock::time_point last_progress;
    bool ended = false;
    std::string exit;
    bool seen_cpu = false;
    double cpu_s = 0;
    Clock::time_point cpu_at;
    std::string heartbeat_key;  // step, activity and collective, as last read
    bool has_heartbeat = false;
  };

  void Observe(const ProbeResult& result, Clock::time_point now);
  double IdleSeconds(const RankProgress& p, Clock::time_point now) const;
  StallReport Report(const ProbeResult& result, Clock::time_point now);

  const ClusterSpec& spec_;
  StallWatchOptions options_;
  std::map<int, RankProgress> ranks_;
  std::unique_ptr<StragglerWatch> stragglers_;
  std::unique_ptr<RankProbe> probe_;
  bool probe_with_stacks_ = false;
  Clock::time_point next_probe_;
  bool reported_ = false;  // this stall was reported; again only after progress resumes
  int reports_ = 0;
};

}  // namespace dtrain
