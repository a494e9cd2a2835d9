#include "launcher/health_watch.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "launcher/error.h"

namespace dtrain {

HealthWatch::HealthWatch(NodeHealthCheck check, ClusterSpec nodes, double interval_s, bool checked,
                         WatchFor watch_for)
    : check_(std::move(check)),
      nodes_(std::move(nodes)),
      interval_s_(interval_s),
      checked_(checked),
      watch_for_(watch_for) {
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

ClusterSpec ReturnWatchNodes(const ClusterSpec& spec, const std::vector<int>& returning,
                             const std::vector<int>& in_job) {
  ClusterSpec watched = spec;
  watched.nodes.clear();
  for (int i : returning) watched.nodes.push_back(spec.nodes[i]);
  size_t witnesses = 0;
  for (int i : in_job) {
    if (witnesses == kReturnWitnesses) break;
    if (std::find(returning.begin(), returning.end(), i) != returning.end()) continue;
    watched.nodes.push_back(spec.nodes[i]);
    watched.nodes.back().witness = true;
    ++witnesses;
  }
  return watched;
}

std::optional<std::string> HealthWatch::TakeReturned() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(returned_, std::nullopt);
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
  have_baseline_ = checked_;
  const auto interval = std::chrono::duration<double>(interval_s_);
  Clock::time_point next =
      checked_ ? started + std::chrono::duration_cast<Clock::duration>(interval) : started;
  // A quarantined node that cannot be reached is not fit; one of the attempt's is left to the
  // node timeout.
  const bool count_unreached = watch_for_ == WatchFor::kReturns;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_until(lock, next, [this] { return stop_.load(); });
      if (stop_) return;
    }
    // Rounds start every interval, so a node that turns unfit is found within the interval and
    // one round, however long rounds take; a round longer than three quarters of the interval is
    // still followed by a quarter of it at rest, so that the nodes are never probed without pause.
    const Clock::time_point round_started = Clock::now();
    NodeHealthFindings found;
    try {
      found = check_(nodes_, count_unreached, [this] { return stop_.load(); });
    } catch (const Error& e) {
      // The check could not run this round (no transport); the next round tries again. No
      // quarantined node passed it.
      for (const NodeSpec& node : nodes_.nodes) found.unfit[node.host] = e.what();
      if (watch_for_ == WatchFor::kUnfit) found = {};
    }
    next = std::max(round_started + std::chrono::duration_cast<Clock::duration>(interval),
                    Clock::now() + std::chrono::duration_cast<Clock::duration>(interval / 4));
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) return;
    ++rounds_;
    const double after_s = std::chrono::duration<double>(Clock::now() - started).count();
    const bool done =
        watch_for_ == WatchFor::kReturns ? JudgeReturns(found) : JudgeUnfit(found, after_s);
    if (done) return;
  }
}

bool HealthWatch::JudgeUnfit(NodeHealthFindings& found, double after_s) {
  for (auto& [host, what] : found.warnings) warnings_.push_back({host, std::move(what), after_s});
  if (!have_baseline_) {
    baseline_ = std::move(found.unfit);
    have_baseline_ = true;
    return false;
  }
  for (const auto& [host, why] : found.unfit) {
    auto before = baseline_.find(host);
    if (before != baseline_.end() && before->second == why) continue;
    found_ = UnfitNode{host, why, after_s, false, {}};
    for (const auto& [other, other_why] : found.unfit) {
      if (other != host && other_why == why) found_->alike.push_back(other);
    }
    return true;  // one node is enough to stop the attempt; the restart's check sees the rest
  }
  return false;
}

// Warnings about nodes outside the job are not news to it; a node returns only once it passed
// every round of kReturnRounds in a row. A witness (NodeSpec::witness, a node of the job in the
// peer test) is not one that may return.
bool HealthWatch::JudgeReturns(const NodeHealthFindings& found) {
  for (const NodeSpec& node : nodes_.nodes) {
    if (node.witness) continue;
    int& rounds = fit_rounds_[node.host];
    rounds = found.unfit.count(node.host) ? 0 : rounds + 1;
    if (rounds >= kReturnRounds) {
      returned_ = node.host;
      return true;  // one at a time: the restart's own watch follows the others
    }
  }
  return false;
}

}  // namespace dtrain
