// The thread and the caller share one State (the thread holds it too): a thread left to a stuck
// sync by Finish outlives the LogSync without touching freed memory.
#include "launcher/log_sync.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/formats/file_sync.h"

namespace dtrain {

using Clock = std::chrono::steady_clock;

struct LogSync::State {
  struct Log {
    int rank = 0;
    std::string path;
    int fd = -1;
    uint64_t synced = 0;  // bytes of the file counted: on the disk, or unsure
    Clock::time_point synced_at;
    bool off = false;  // its file system cannot sync
  };
  explicit State(double interval_s)
      : interval(std::chrono::milliseconds(static_cast<long long>(interval_s * 1000))) {}
  ~State() {
    for (const Log& log : logs) ::close(log.fd);
  }

  const std::chrono::milliseconds interval;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<Log> logs;  // appended by Watch; `synced*` and `off` changed by the thread only
  bool stop = false;
  bool done = false;
  std::string also;
  std::string also_error;
  std::optional<LogSyncFailure> first;
  bool first_taken = false;
  uint64_t unsure = 0;
  std::string error;
};

namespace {

// One sync of every log that grew since its last.
void SyncRound(LogSync::State& s);

void Loop(const std::shared_ptr<LogSync::State>& s) {
  std::unique_lock<std::mutex> lock(s->mu);
  for (;;) {
    s->cv.wait_for(lock, s->interval, [&] { return s->stop; });
    const bool last = s->stop;
    const std::string also = s->also;
    lock.unlock();
    SyncRound(*s);
    std::string also_error;
    if (last && !also.empty()) {
      also_error = clip::SyncToDisk(also);
      if (also_error.empty()) also_error = clip::SyncToDisk(clip::FolderOf(also));
    }
    lock.lock();
    if (last) {
      s->also_error = also_error;
      s->done = true;
      s->cv.notify_all();
      return;
    }
  }
}

void SyncRound(LogSync::State& s) {
  struct Todo {
    size_t index;
    int fd;
    uint64_t synced;
  };
  std::vector<Todo> todo;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (size_t i = 0; i < s.logs.size(); ++i) {
      if (!s.logs[i].off) todo.push_back({i, s.logs[i].fd, s.logs[i].synced});
    }
  }
  for (const Todo& t : todo) {
    struct stat st;
    if (::fstat(t.fd, &st) != 0) continue;
    // Appended only: its size is every byte written to it so far.
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size == t.synced) continue;
    int failed = 0;
    while (::fdatasync(t.fd) != 0) {
      if (errno == EINTR) continue;
      failed = errno;
      break;
    }
    const Clock::time_point now = Clock::now();
    std::lock_guard<std::mutex> lock(s.mu);
    LogSync::State::Log& log = s.logs[t.index];
    if (failed != 0 && clip::SaysNothingOfTheDisk(failed)) {
      log.off = true;
      continue;
    }
    if (failed == 0) {
      log.synced = size;
      log.synced_at = now;
      continue;
    }
    const uint64_t bytes = size > log.synced ? size - log.synced : 0;
    log.synced = size;  // counted once, as unsure
    s.unsure += bytes;
    if (s.error.empty()) s.error = std::strerror(failed);
    if (!s.first) {
      s.first = LogSyncFailure{log.rank, log.path, std::strerror(failed), bytes,
                               std::chrono::duration<double>(now - log.synced_at).count()};
    }
  }
}

}  // namespace

LogSync::LogSync(double interval_s) : state_(std::make_shared<State>(interval_s)) {
  thread_ = std::thread([s = state_] { Loop(s); });
}

LogSync::~LogSync() {
  if (!finished_) Finish(kLastSyncWaitS);
}

void LogSync::Watch(int rank, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  const uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  std::lock_guard<std::mutex> lock(state_->mu);
  for (const State::Log& log : state_->logs) {
    if (log.rank == rank) {
      ::close(fd);
      return;
    }
  }
  // What the file held before (an earlier job's run under the same name) counts as synced.
  state_->logs.push_back(State::Log{rank, path, fd, size, Clock::now(), false});
}

std::optional<LogSyncFailure> LogSync::TakeFirstFailure() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->first || state_->first_taken) return std::nullopt;
  state_->first_taken = true;
  return state_->first;
}

uint64_t LogSync::unsure_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->unsure;
}

std::string LogSync::error() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->error;
}

LogSyncEnd LogSync::Finish(double wait_s, const std::string& also) {
  LogSyncEnd end;
  if (finished_) return end;
  finished_ = true;
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->stop = true;
  state_->also = also;
  state_->cv.notify_all();
  end.returned =
      state_->cv.wait_for(lock, std::chrono::milliseconds(static_cast<long long>(wait_s * 1000)),
                          [&] { return state_->done; });
  end.also_error = state_->also_error;
  lock.unlock();
  if (end.returned) {
    thread_.join();
  } else {
    thread_.detach();  // it holds the state; the process may end before it does
  }
  return end;
}

}  // namespace dtrain
