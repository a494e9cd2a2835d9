// The heartbeat writer thread and the stall inspector. Setters take the mutex for a few stores;
// everything slow (file, store) happens on the writer thread.
#include "runtime/dist/heartbeat.h"
#include "runtime/trace/heartbeat_vocabulary.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace dtrain::clip {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int64_t WallMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ToString(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::vector<uint8_t> ToBytes(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string Size(int64_t bytes) {
  char text[32];
  if (bytes >= (1 << 20)) {
    std::snprintf(text, sizeof text, "%.0f MiB", static_cast<double>(bytes) / (1 << 20));
  } else if (bytes >= (1 << 10)) {
    std::snprintf(text, sizeof text, "%.0f KiB", static_cast<double>(bytes) / (1 << 10));
  } else {
    std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(bytes));
  }
  return text;
}

int64_t ThreadCpuNanos() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// Adds the time from its making to its end to a counter: the heartbeat's bill for a setter.
class PathTimer {
 public:
  explicit PathTimer(std::atomic<int64_t>& total) : total_(total), start_(Clock::now()) {}
  ~PathTimer() {
    total_.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count(),
        std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t>& total_;
  Clock::time_point start_;
};

}  // namespace

Heartbeat::~Heartbeat() {
  Stop();
}

void Heartbeat::Start(const std::string& dir, int rank, int world_size,
                      c10::intrusive_ptr<c10d::Store> store, double stall_timeout_s) {
  if (thread_.joinable()) return;
  dir_ = dir;
  rank_ = rank;
  world_size_ = world_size;
  store_ = std::move(store);
  stall_timeout_s_ = stall_timeout_s;
  period_s_ = stall_timeout_s > 0 ? std::clamp(stall_timeout_s / 5, 0.2, 2.0) : 2.0;
  if (!dir_.empty()) ::mkdir(dir_.c_str(), 0755);
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Heartbeat::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::BeginStep() {
  const PathTimer timer(path_ns_);
  std::lock_guard<std::mutex> lock(mu_);
  in_step_ = true;
  step_began_ = Clock::now();
  this_step_waited_s_ = 0;
}

void Heartbeat::SetStep(int64_t step) {
  const PathTimer timer(path_ns_);
  std::lock_guard<std::mutex> lock(mu_);
  step_ = step;
  if (in_step_) {
    steps_s_ += Since(step_began_);
    steps_waited_s_ += this_step_waited_s_;
    in_step_ = false;
  }
}

void Heartbeat::TimeSteps(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  time_steps_ = on;
}

void Heartbeat::Waited(double seconds) {
  const PathTimer timer(path_ns_);
  std::lock_guard<std::mutex> lock(mu_);
  if (in_step_) this_step_waited_s_ += seconds;
}

void Heartbeat::SetActivity(const char* activity) {
  const PathTimer timer(path_ns_);
  std::lock_guard<std::mutex> lock(mu_);
  if (activity_ != activity) {
    activity_ = activity;
    activity_since_ = Clock::now();
  }
}

int64_t Heartbeat::EnterCollective(const std::string& set, const std::vector<int>& members,
                                   const char* name, int64_t bytes, const std::string& what) {
  const PathTimer timer(path_ns_);
  std::lock_guard<std::mutex> lock(mu_);
  auto seq =
      std::find_if(seqs_.begin(), seqs_.end(), [&](const auto& s) { return s.first == set; });
  if (seq == seqs_.end()) seq = seqs_.insert(seqs_.end(), {set, 0});
  Collective c;
  c.set = set;
  c.members = members;
  c.name = name;
  c.seq = ++seq->second;
  c.bytes = bytes;
  c.what = what;
  c.started = Clock::now();
  c.waiting = true;
  in_flight_.push_back(c);
  last_ = c;
  has_last_ = true;
  return c.seq;
}

void Heartbeat::LeaveCollective(const std::string& set, int64_t seq) {
  const PathTimer timer(path_ns_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                         [&](const Collective& c) { return c.set == set && c.seq == seq; });
  if (it != in_flight_.end()) in_flight_.erase(it);
  if (last_.set == set && last_.seq == seq) {
    last_.waiting = false;
    last_.ended = Clock::now();
  }
}

void Heartbeat::Loop() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_) {
    lock.unlock();
    try {
      if (store_ && stall_timeout_s_ > 0) Inspect();
      if (!dir_.empty()) WriteFile();
    } catch (const std::exception&) {
      // The store went away (rank 0 ended): the heartbeat is best effort.
    }
    writer_cpu_ns_.store(ThreadCpuNanos(), std::memory_order_relaxed);
    beats_.fetch_add(1, std::memory_order_relaxed);
    lock.lock();
    stop_cv_.wait_for(lock, std::chrono::duration<double>(period_s_), [this] { return stop_; });
  }
}

void Heartbeat::WriteFile() {
  std::ostringstream text;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto line = [&text](const char* key, const auto& value) {
      text << key << ' ' << value << '\n';
    };
    line(heartbeat::kPid, ::getpid());
    line(heartbeat::kRank, rank_);
    line(heartbeat::kStep, step_);
    line(heartbeat::kActivity, activity_);
    line(heartbeat::kActivitySeconds, Since(activity_since_));
    const Collective* c = !in_flight_.empty() ? &in_flight_.front() : has_last_ ? &last_ : nullptr;
    if (c) {
      line(heartbeat::kCollective, c->name);
      line(heartbeat::kCollectiveSeq, c->seq);
      line(heartbeat::kCollectiveBytes, c->bytes);
      line(heartbeat::kCollectiveSet, c->set);
      line(heartbeat::kCollectiveWhat, c->what);
      line(heartbeat::kCollectiveState, c->waiting ? heartbeat::kWaiting : heartbeat::kDone);
      line(heartbeat::kCollectiveSeconds, Since(c->waiting ? c->started : c->ended));
      if (c->waiting && !c->missing.empty()) line(heartbeat::kMissing, c->missing);
    }
    if (time_steps_) {
      char seconds[64];  // microseconds, however long the job has run
      std::snprintf(seconds, sizeof seconds, "%.6f", steps_s_);
      line(heartbeat::kStepSeconds, seconds);
      std::snprintf(seconds, sizeof seconds, "%.6f", steps_waited_s_);
      line(heartbeat::kStepWaitedSeconds, seconds);
    }
    line(heartbeat::kWrittenUs, WallMicros());
  }
  const std::string path = dir_ + "/rank-" + std::to_string(rank_) + ".txt";
  const std::string tmp = path + ".tmp";
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    const std::string bytes = text.str();
    const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    if (std::fclose(f) == 0 && ok) std::rename(tmp.c_str(), path.c_str());
  }
}

// Publishes this rank's heartbeat to the store; for collectives waited in for half the stall
// timeout, marks this rank entered and finds who has not.
void Heartbeat::Inspect() {
  std::string beat;
  std::vector<Collective> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    beat = std::to_string(step_) + " " + activity_ + " " + std::to_string(WallMicros());
    for (const Collective& c : in_flight_)
      if (Since(c.started) >= stall_timeout_s_ / 2) old.push_back(c);
  }
  store_->set("heartbeat/" + std::to_string(rank_), ToBytes(beat));
  for (Collective& c : old) {
    c.missing = MissingRanks(c);
    bool warn = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Collective& live : in_flight_) {
        if (live.set != c.set || live.seq != c.seq) continue;
        live.marked = true;
        live.missing = c.missing;
        warn = !live.warned && Since(live.started) >= stall_timeout_s_ && !c.missing.empty();
        live.warned = live.warned || warn;
      }
      if (last_.set == c.set && last_.seq == c.seq) last_.missing = c.missing;
    }
    if (warn) std::fprintf(stderr, "dtrain-clip: stall: %s\n", Describe(c).c_str());
  }
}

std::string Heartbeat::MissingRanks(Collective& c) {
  const std::string prefix = "stall/" + c.set + "/" + std::to_string(c.seq) + "/";
  if (!c.marked) store_->set(prefix + std::to_string(rank_), ToBytes("entered"));
  std::vector<int> members = c.members;
  if (members.empty())
    for (int r = 0; r < world_size_; ++r) members.push_back(r);
  std::string missing;
  for (int r : members) {
    if (r == rank_ || store_->check({prefix + std::to_string(r)})) continue;
    missing += (missing.empty() ? "" : ",") + std::to_string(r);
  }
  return missing;
}

std::string Heartbeat::LastActivityOf(int rank) {
  const std::string key = "heartbeat/" + std::to_string(rank);
  if (!store_ || !store_->check({key})) return "no heartbeat in the store";
  std::istringstream beat(ToString(store_->get(key)));
  std::string step, activity;
  long long wall_us = 0;
  beat >> step >> activity >> wall_us;
  char text[160];
  std::snprintf(text, sizeof text, "last activity %s at step %s, %.0f s ago", activity.c_str(),
                step.c_str(), static_cast<double>(WallMicros() - wall_us) / 1e6);
  return text;
}

std::string Heartbeat::Describe(const Collective& c) {
  std::string text = std::string(c.name) + " #" + std::to_string(c.seq) + " (" + c.set +
                     (c.what.empty() ? "" : ": " + c.what) + ", " + Size(c.bytes) + ") on rank " +
                     std::to_string(rank_) + ": waited " +
                     std::to_string(static_cast<long long>(Since(c.started))) + " s";
  if (c.missing.empty()) return text + "; every member has entered it";
  std::istringstream ranks(c.missing);
  for (std::string r; std::getline(ranks, r, ',');) {
    text += "; rank " + r + " has not entered it: " + LastActivityOf(std::stoi(r));
  }
  return text;
}

std::string Heartbeat::DescribeStall(const std::string& set, int64_t seq) {
  Collective c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                           [&](const Collective& x) { return x.set == set && x.seq == seq; });
    if (it == in_flight_.end()) return "";
    c = *it;
  }
  if (store_) {
    try {
      c.missing = MissingRanks(c);
    } catch (const std::exception&) {
    }
  }
  return Describe(c);
}

HeartbeatCost Heartbeat::Cost() const {
  HeartbeatCost cost;
  cost.path_ms = static_cast<double>(path_ns_.load(std::memory_order_relaxed)) / 1e6;
  cost.writer_cpu_ms = static_cast<double>(writer_cpu_ns_.load(std::memory_order_relaxed)) / 1e6;
  cost.beats = beats_.load(std::memory_order_relaxed);
  return cost;
}

Heartbeat& GlobalHeartbeat() {
  static Heartbeat heartbeat;
  return heartbeat;
}

}  // namespace dtrain::clip
