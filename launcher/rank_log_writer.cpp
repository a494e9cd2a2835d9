// The caller's thread queues; the writer thread writes, in order, and says the outages
// (RankLogOutage) as the writes find them. A thread left stuck by the destructor keeps the state
// and the logs it writes alive until the process ends.
#include "launcher/rank_log_writer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>

#include <fmt/format.h>

#include "launcher/rank_log_outage.h"

namespace dtrain {

using Clock = std::chrono::steady_clock;

struct RankLogWriter::Task {
  RankLog* log = nullptr;  // null: the rank has no log (its output goes to the copies only)
  int rank = 0;
  std::string bytes;
  int64_t now_us = 0;
  std::string restart;   // non-empty: MarkRestart(restart)
  int stream = -1;       // the rank's output on this OutputStream (the copies take it); -1: none
  bool finish = false;   // the rank ended: the copies take its last line
  uint64_t dropped = 0;  // the rank's bytes lost before this one (the memory was full)
  uint64_t seq = 0;
};

struct RankLogWriter::State {
  // Whether the write under way has taken `after_s` or more. mu held.
  bool Stuck(Clock::time_point now, double after_s) const {
    return busy && std::chrono::duration<double>(now - busy_since).count() >= after_s;
  }
  void Run();
  // The copies' part of `task`, each write under way shown to TakeStuck.
  void Copy(const Task& task, std::unique_lock<std::mutex>& lock);
  // `bytes` of rank `rank`'s output that found no room: counted in its log (null: none), and
  // said; the copies end the line the gap cut.
  void Lose(int rank, RankLog* log, uint64_t bytes);

  RankLogOutage outage{stderr};  // the writer thread's
  mutable std::mutex mu;
  std::condition_variable work;  // to the writer: a task, or the end
  std::condition_variable done;  // from the writer: a task written
  std::vector<std::unique_ptr<RankOutputCopy>> copies;  // set before any output
  std::deque<Task> queue;
  uint64_t held = 0;  // bytes in the queue
  uint64_t next_seq = 1;
  uint64_t written_seq = 0;  // the last task written
  bool busy = false;         // a task being written
  int busy_rank = 0;
  const RankLog* busy_log = nullptr;  // its path never changes: read by TakeStuck
  const RankOutputCopy* busy_copy = nullptr;  // a copy's write under way (else the log's)
  OutputStream busy_stream = OutputStream::kStdout;
  Clock::time_point busy_since;
  bool stuck_said = false;  // for this hang
  // Rank -> its log and the bytes lost since its last task queued.
  std::map<int, std::pair<RankLog*, uint64_t>> dropped;
  bool stop = false;
};

void RankLogWriter::State::Run() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    work.wait(lock, [&] { return stop || !queue.empty(); });
    if (queue.empty()) return;  // stop, with nothing left to write
    Task task = std::move(queue.front());
    queue.pop_front();
    held -= task.bytes.size();
    busy = true;
    busy_rank = task.rank;
    busy_log = task.log;
    busy_copy = task.log || copies.empty() ? nullptr : copies.front().get();
    busy_since = Clock::now();
    lock.unlock();
    if (task.dropped > 0) Lose(task.rank, task.log, task.dropped);
    if (task.log && !task.finish) {
      if (task.restart.empty()) {
        task.log->Append(task.bytes, task.now_us);
      } else {
        task.log->MarkRestart(task.restart, task.now_us);
      }
      outage.AfterWrite(task.rank, *task.log);
    }
    if (!copies.empty() && (task.stream >= 0 || task.finish)) Copy(task, lock);
    const double took = std::chrono::duration<double>(Clock::now() - busy_since).count();
    lock.lock();
    if (stuck_said) {
      fmt::print(stderr,
                 "dtrain: the drive under the job's folder answers again: a write to rank {}'s "
                 "log took {:.1f} s; what was held in memory is written now\n",
                 task.rank, took);
      std::fflush(stderr);
      stuck_said = false;
    }
    busy = false;
    // What found no room at the end of a rank's output is marked once the drive answers.
    if (queue.empty() && !dropped.empty()) {
      const std::map<int, std::pair<RankLog*, uint64_t>> lost = std::move(dropped);
      dropped.clear();
      lock.unlock();
      for (const auto& [rank, log_bytes] : lost) {
        Lose(rank, log_bytes.first, log_bytes.second);
        if (!log_bytes.first) continue;
        log_bytes.first->Append("", WallMicros());  // the mark alone
        outage.AfterWrite(rank, *log_bytes.first);
      }
      lock.lock();
    }
    written_seq = task.seq;
    done.notify_all();
  }
}

void RankLogWriter::State::Copy(const Task& task, std::unique_lock<std::mutex>& lock) {
  const OutputStream stream = task.stream == static_cast<int>(OutputStream::kStderr)
                                  ? OutputStream::kStderr
                                  : OutputStream::kStdout;
  for (const std::unique_ptr<RankOutputCopy>& copy : copies) {
    lock.lock();
    busy_copy = copy.get();
    busy_stream = stream;
    lock.unlock();
    if (task.finish) {
      copy->Finish(task.rank);
    } else {
      copy->Output(task.rank, stream, task.bytes);
    }
  }
}

void RankLogWriter::State::Lose(int rank, RankLog* log, uint64_t bytes) {
  for (const std::unique_ptr<RankOutputCopy>& copy : copies) copy->Finish(rank);
  if (!log) return;
  log->Lose(bytes, fmt::format("dtrain held {} MiB of output in memory for a drive that did not "
                               "answer, and had no room for it",
                               kHeldBytes >> 20));
  outage.AfterWrite(rank, *log);
}

RankLogWriter::RankLogWriter(std::map<int, std::unique_ptr<RankLog>>& logs)
    : logs_(logs), state_(std::make_shared<State>()) {
  thread_ = std::thread([s = state_] { s->Run(); });
}

RankLogWriter::~RankLogWriter() {
  bool stuck;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    stuck = state_->Stuck(Clock::now(), kWaitS);
  }
  const bool drained = !stuck && Drain(kLastWaitS);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->work.notify_all();
  if (drained) {
    thread_.join();
    return;
  }
  // Stuck in a write the kernel holds: the thread keeps the state; the logs it writes are never
  // freed, so that it finds them when the write returns.
  thread_.detach();
  for (auto& [rank, log] : logs_) static_cast<void>(log.release());
}

void RankLogWriter::AddCopy(std::unique_ptr<RankOutputCopy> copy) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->copies.push_back(std::move(copy));
}

void RankLogWriter::Output(int rank, OutputStream stream, std::string_view bytes, int64_t now_us) {
  if (bytes.empty()) return;
  Task task;
  task.rank = rank;
  task.bytes = bytes;
  task.now_us = now_us;
  task.stream = static_cast<int>(stream);
  Enqueue(std::move(task));
}

void RankLogWriter::Finish(int rank) {
  Task task;
  task.rank = rank;
  task.finish = true;
  Enqueue(std::move(task));
}

void RankLogWriter::Append(int rank, std::string_view bytes, int64_t now_us) {
  if (bytes.empty()) return;
  Task task;
  task.rank = rank;
  task.bytes = bytes;
  task.now_us = now_us;
  Enqueue(std::move(task));
}

void RankLogWriter::MarkRestart(int rank, const std::string& what, int64_t now_us) {
  Task task;
  task.rank = rank;
  task.now_us = now_us;
  task.restart = what;
  Enqueue(std::move(task));
}

void RankLogWriter::Enqueue(Task task) {
  State& s = *state_;
  const auto log = logs_.find(task.rank);
  task.log = log == logs_.end() ? nullptr : log->second.get();
  // The copies are set before any output, on this thread: read here without the lock.
  const bool to_log = task.log && !task.finish;
  const bool copied = !s.copies.empty() && (task.stream >= 0 || task.finish);
  if (!to_log && !copied) return;
  const uint64_t size = task.bytes.size();
  std::unique_lock<std::mutex> lock(s.mu);
  // A rank losing output goes on losing it while the drive hangs: one gap, not a smaller chunk
  // kept now and then between many. Its marks (a restart, its end) are kept.
  if (size > 0 && s.dropped.count(task.rank) && s.Stuck(Clock::now(), kWaitS)) {
    s.dropped[task.rank].second += size;
    return;
  }
  if (s.held + size > kHeldBytes) {
    // A drive slower than the ranks holds them back (their pipes fill); one that hangs loses what
    // has no room.
    if (!s.Stuck(Clock::now(), kWaitS)) {
      s.done.wait_for(lock, std::chrono::duration<double>(kWaitS),
                      [&] { return s.held + size <= kHeldBytes; });
    }
    if (s.held + size > kHeldBytes) {
      auto& [dropped_log, dropped_bytes] = s.dropped[task.rank];
      dropped_log = task.log;
      dropped_bytes += size;
      return;
    }
  }
  // The log marks the gap with what it writes next; the end of a rank's output waits for the
  // queue's end (Run).
  if (auto d = s.dropped.find(task.rank); to_log && d != s.dropped.end()) {
    task.dropped = d->second.second;
    s.dropped.erase(d);
  }
  task.seq = s.next_seq++;
  s.held += size;
  s.queue.push_back(std::move(task));
  // A writer at work finds it next; an idle one waits for this.
  if (!s.busy && s.queue.size() == 1) s.work.notify_one();
}

bool RankLogWriter::Drain(double wait_s) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t last = s.next_seq - 1;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(wait_s));
  while (s.written_seq < last) {
    const Clock::time_point now = Clock::now();
    // A write that has not returned in kWaitS is a drive that hangs: not waited for (a restart
    // would wait for it each time).
    if (now >= deadline || s.Stuck(now, kWaitS)) return false;
    s.done.wait_until(lock, std::min(deadline, now + std::chrono::milliseconds(100)));
  }
  return true;
}

void RankLogWriter::DrainAll() {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  const uint64_t last = s.next_seq - 1;
  s.done.wait(lock, [&] { return s.written_seq >= last; });
}

std::optional<LogWriteStuck> RankLogWriter::TakeStuck(double after_s) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  const Clock::time_point now = Clock::now();
  if (s.stuck_said || !s.Stuck(now, after_s)) return std::nullopt;
  s.stuck_said = true;
  LogWriteStuck stuck{s.busy_rank, "log", "",
                      std::chrono::duration<double>(now - s.busy_since).count(), s.held};
  if (s.busy_copy) {
    stuck.what = "output copy";
    stuck.path = s.busy_copy->PathOf(s.busy_rank, s.busy_stream);
  } else if (s.busy_log) {
    stuck.path = s.busy_log->path();
  }
  return stuck;
}

uint64_t RankLogWriter::held_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->held;
}

uint64_t RankLogWriter::unmarked_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  uint64_t bytes = 0;
  for (const auto& [rank, dropped] : state_->dropped) bytes += dropped.second;
  return bytes;
}

}  // namespace dtrain
