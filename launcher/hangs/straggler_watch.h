// The straggler watch of a running job: names a rank that keeps the others waiting, step after
// step, because it is slow on its own (a throttled CPU or GPU, a slow disk under its loader, a
// noisy neighbour), not because it stopped (the stall watch's case).
//
// It reads what dtrain-clip's heartbeat says of its training steps (step_s, step_waited_s:
// seconds inside the steps done, and of those, seconds blocked in collectives), as the stall
// watch's probe brings them. Over a window of at least kWindowSeconds in which every rank took
// kWindowSteps steps, a rank's busy time per step is its step time less its waits. A rank is slow
// in that window when its busy time per step is `factor` times the median of the other ranks'
// and the others waited about that difference for it (half of it at least, so a rank busy with
// work nobody waits for is not named). Slow in kStrikes windows in a row, it is a straggler, named
// once until a window finds it not slow again. Steps only count: evaluation, checkpoints and
// logging between steps do not.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace dtrain {

// One rank as its heartbeat said, at one probe.
struct StepSample {
  std::string host;
  long long step = 0;
  double step_s = 0;    // inside the steps done
  double waited_s = 0;  // of that, blocked in collectives
};

// A rank found straggling, and what it costs the job.
struct Straggler {
  int rank = -1;
  std::string host;
  double busy_s = 0;         // its busy time per step
  double others_busy_s = 0;  // the median of the other ranks'
  double others_wait_s = 0;  // the median of the other ranks' waits per step
  double window_s = 0;       // the last window's length
  long long steps = 0;       // steps in the last window
  // "rank 1 on node b: busy 0.84 s a step against 0.40 s for the other ranks (2.1x) over the
  // last 31 s (40 steps); they wait 0.44 s a step for it"
  std::string Describe() const;
  // Its time per training step: its own busy time, or the others' step (their busy time and
  // their wait for it) where that is longer (its collectives are slow too).
  double StepSeconds() const;
};

// How long the ranks have between SIGTERM and SIGKILL when a straggler's node leaves the job:
// the grace period, and twice the straggler's step on top. A rank stopping on a signal ends the
// step it is in and the one the ranks agree to stop after, then writes its checkpoint
// (dtrain-clip, runtime/train/stop_signals.h, whose own window is twice the last step); the
// grace period alone, sized for ranks of the usual pace, would end a slow one before it got
// there, and the steps since its last checkpoint would be trained again. A grace period of 0
// stays 0.
double StragglerGraceSeconds(double grace_period_s, const Straggler& straggler);

class StragglerWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr double kWindowSeconds = 10;
  static constexpr long long kWindowSteps = 3;
  static constexpr int kStrikes = 2;
  // Busy time per step above the others' by less than this is noise, whatever the ratio.
  static constexpr double kMinExcessSeconds = 0.005;

  explicit StragglerWatch(double factor) : factor_(factor) {}

  // One probe's samples of the ranks still running that have step times. A rank missing from
  // `samples` (ended, or not yet measured) sits the window out.
  void Observe(const std::map<int, StepSample>& samples, Clock::time_point now);
  // The straggler just named, once.
  std::optional<Straggler> Take();

  double factor() const { return factor_; }

 private:
  void Judge(const std::map<int, StepSample>& samples, double window_s);

  double factor_;
  std::map<int, StepSample> window_start_;
  Clock::time_point window_started_;
  std::map<int, int> strikes_;
  std::map<int, bool> named_;
  std::optional<Straggler> found_;
};

}  // namespace dtrain
