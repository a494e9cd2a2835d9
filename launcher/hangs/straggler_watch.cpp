// Windows of steps from the heartbeat's step times; a rank slow in kStrikes of them in a row is
// named.
#include "launcher/hangs/straggler_watch.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

namespace dtrain {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::string Straggler::Describe() const {
  return fmt::format(
      "rank {} on node {}: busy {:.3g} s a step against {:.3g} s for the other ranks ({:.1f}x) "
      "over the last {:.0f} s ({} steps); they wait {:.3g} s a step for it",
      rank, host, busy_s, others_busy_s, others_busy_s > 0 ? busy_s / others_busy_s : 0.0, window_s,
      steps, others_wait_s);
}

double Straggler::StepSeconds() const {
  return std::max(busy_s, others_busy_s + others_wait_s);
}

double StragglerGraceSeconds(double grace_period_s, const Straggler& straggler) {
  if (grace_period_s <= 0) return 0;  // --grace-period 0: SIGKILL at once, as asked
  return grace_period_s + 2 * straggler.StepSeconds();
}

void StragglerWatch::Observe(const std::map<int, StepSample>& samples, Clock::time_point now) {
  // A rank that joined or left since the window began: start the window again.
  bool same_ranks = samples.size() == window_start_.size();
  for (const auto& [rank, s] : samples) {
    auto it = window_start_.find(rank);
    same_ranks = same_ranks && it != window_start_.end() && s.step >= it->second.step;
  }
  if (!same_ranks || window_start_.empty()) {
    window_start_ = samples;
    window_started_ = now;
    strikes_.clear();  // windows in a row are windows of the same ranks
    return;
  }
  const double window_s = std::chrono::duration<double>(now - window_started_).count();
  if (window_s < kWindowSeconds) return;
  for (const auto& [rank, s] : samples) {
    if (s.step - window_start_.at(rank).step < kWindowSteps) return;
  }
  Judge(samples, window_s);
  window_start_ = samples;
  window_started_ = now;
}

void StragglerWatch::Judge(const std::map<int, StepSample>& samples, double window_s) {
  if (samples.size() < 2) return;
  struct PerStep {
    double busy = 0, wait = 0;
    long long steps = 0;
  };
  std::map<int, PerStep> per_step;
  for (const auto& [rank, s] : samples) {
    const StepSample& from = window_start_.at(rank);
    PerStep p;
    p.steps = s.step - from.step;
    p.wait = std::max(0.0, s.waited_s - from.waited_s) / static_cast<double>(p.steps);
    p.busy = std::max(0.0, (s.step_s - from.step_s) - (s.waited_s - from.waited_s)) /
             static_cast<double>(p.steps);
    per_step[rank] = p;
  }
  std::optional<Straggler> slowest;  // of those slow kStrikes windows in a row, not yet named
  for (const auto& [rank, p] : per_step) {
    std::vector<double> busy, wait;
    for (const auto& [other, q] : per_step) {
      if (other == rank) continue;
      busy.push_back(q.busy);
      wait.push_back(q.wait);
    }
    const double others_busy = Median(busy), others_wait = Median(wait);
    const double excess = p.busy - others_busy;
    const bool slow =
        p.busy >= factor_ * others_busy && excess >= kMinExcessSeconds && others_wait >= excess / 2;
    if (!slow) {
      strikes_[rank] = 0;
      named_[rank] = false;
      continue;
    }
    if (++strikes_[rank] < kStrikes || named_[rank]) continue;
    if (slowest && slowest->busy_s >= p.busy) continue;
    Straggler s;
    s.rank = rank;
    s.host = samples.at(rank).host;
    s.busy_s = p.busy;
    s.others_busy_s = others_busy;
    s.others_wait_s = others_wait;
    s.window_s = window_s;
    s.steps = p.steps;
    slowest = s;
  }
  if (!slowest) return;
  named_[slowest->rank] = true;
  found_ = slowest;
}

std::optional<Straggler> StragglerWatch::Take() {
  std::optional<Straggler> s = std::move(found_);
  found_.reset();
  return s;
}

}  // namespace dtrain
