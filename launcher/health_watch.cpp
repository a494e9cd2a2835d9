#include "launcher/health_watch.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <utility>

#include "launcher/error.h"

namespace dtrain {

HealthWatch::HealthWatch(NodeHealthCheck check, ClusterSpec nodes, double interval_s, bool checked)
    : check_(std::move(check)),
      nodes_(std::move(nodes)),
      interval_s_(interval_s),
      checked_(checked) {
  thread_ = std::thread([this] { Loop(); });
}

HealthWatch::~HealthWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::optional<UnfitNode> HealthWatch::Take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!found_ || taken_) return std::nullopt;
  taken_ = true;
  return found_;
}

std::vector<NodeWarning> HealthWatch::TakeWarnings() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(warnings_, {});
}

int HealthWatch::rounds() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return rounds_;
}

void HealthWatch::Loop() {
  // Signals are the supervisor's (its interrupt flag); this thread takes none.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now();
  std::map<std::string, std::string> baseline;
  bool have_baseline = checked_;
  const auto interval = std::chrono::duration<double>(interval_s_);
  Clock::time_point next =
      have_baseline ? started + std::chrono::duration_cast<Clock::duration>(interval) : started;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_until(lock, next, [this] { return stop_.load(); });
      if (stop_) return;
    }
    NodeHealthFindings found;
    try {
      found = check_(nodes_, /*count_unreached=*/false, [this] { return stop_.load(); });
    } catch (const Error&) {
      // The check could not run this round (no transport); the next round tries again.
    }
    next = Clock::now() + std::chrono::duration_cast<Clock::duration>(interval);
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    ++rounds_;
    const double after_s = std::chrono::duration<double>(Clock::now() - started).count();
    for (auto& [host, what] : found.warnings) warnings_.push_back({host, std::move(what), after_s});
    std::map<std::string, std::string>& unfit = found.unfit;
    if (!have_baseline) {
      baseline = std::move(unfit);
      have_baseline = true;
      continue;
    }
    for (const auto& [host, why] : unfit) {
      auto before = baseline.find(host);
      if (before != baseline.end() && before->second == why) continue;
      found_ = UnfitNode{host, why, after_s};
      return;  // one node is enough to stop the attempt; the restart's check sees the rest
    }
  }
}

}  // namespace dtrain
