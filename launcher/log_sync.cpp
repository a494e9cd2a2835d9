// Two pipes between dtrain and the syncing process: commands one way (watch a log; finish), reports
// the other (a sync begins, ends, failed; the last one done), read by a thread of dtrain's into
// the State its callers ask. The syncing process is forked from a process with threads, so it
// makes system calls only (no allocation, no locks) until it exits.
#include "launcher/log_sync.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/formats/file_sync.h"

namespace dtrain {
namespace {

enum CommandKind : int32_t { kWatch = 1, kFinish = 2 };
struct CommandHead {
  int32_t kind;
  int32_t rank;
  uint32_t length;  // of the path after it
};
// A command is written whole, or not at all (a pipe's writes up to PIPE_BUF are).
constexpr size_t kMaxPath = PIPE_BUF - sizeof(CommandHead);

enum ReportKind : int32_t { kBegin = 1, kEnd = 2, kFailed = 3, kAlso = 4, kDone = 5 };
struct Report {
  int32_t kind;
  int32_t rank;
  int32_t error;  // errno; 0: none
  int32_t unused;
  uint64_t bytes;
  int64_t since_us;
};

// The syncing process's logs: made before the fork, filled in by the process.
struct ChildLog {
  int32_t rank;
  int fd;
  uint64_t synced;  // bytes of the file counted: on the disk, or unsure
  int64_t synced_us;
  bool off;  // its file system cannot sync
};
constexpr size_t kMaxLogs = 16384;

int64_t NowMicros() {
  timespec t;
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<int64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

bool ReadWhole(int fd, void* buffer, size_t size) {
  char* p = static_cast<char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteWhole(int fd, const void* buffer, size_t size) {
  const char* p = static_cast<const char*>(buffer);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The syncing process from here on: system calls only.
class SyncingProcess {
 public:
  SyncingProcess(int commands, int reports, int64_t interval_us, ChildLog* logs)
      : commands_(commands), reports_(reports), interval_us_(interval_us), logs_(logs) {}

  [[noreturn]] void Run(pid_t parent) {
    // It ends with dtrain (its pipe closed, or SIGKILL when dtrain dies), not with the signals
    // dtrain's group gets (Ctrl-C).
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGTSTP}) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      ::sigaction(sig, &ignore, nullptr);
    }
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(0);
    // Only its pipes stay open: another of dtrain's descriptors held here (a pipe whose reader
    // waits for dtrain to close it) would outlive dtrain while a sync is stuck.
    const int commands = ::fcntl(commands_, F_DUPFD, 10);
    const int reports = ::fcntl(reports_, F_DUPFD, 10);
    if (commands < 0 || reports < 0 || ::dup2(commands, 3) < 0 || ::dup2(reports, 4) < 0)
      ::_exit(1);
    commands_ = 3;
    reports_ = 4;
    ::syscall(SYS_close_range, 5U, ~0U, 0U);
    int64_t next = NowMicros() + interval_us_;
    for (;;) {
      const int64_t wait_us = next - NowMicros();
      pollfd p{commands_, POLLIN, 0};
      const int ready = ::poll(&p, 1, wait_us > 0 ? static_cast<int>(wait_us / 1000) + 1 : 0);
      if (ready < 0 && errno == EINTR) continue;
      if (ready > 0) {
        Command();
        continue;
      }
      Round();
      next = NowMicros() + interval_us_;
    }
  }

 private:
  void Command() {
    CommandHead head;
    char path[PIPE_BUF];
    if (!ReadWhole(commands_, &head, sizeof head) || head.length > kMaxPath ||
        !ReadWhole(commands_, path, head.length)) {
      ::_exit(0);  // dtrain closed it, or died
    }
    path[head.length] = '\0';
    if (head.kind == kWatch) {
      if (count_ == kMaxLogs) return;
      const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;
      struct stat st;
      const uint64_t size = ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
      // What the file held before (an earlier run under the same job name) counts as synced.
      logs_[count_++] = ChildLog{head.rank, fd, size, NowMicros(), false};
      return;
    }
    Round();
    if (head.length > 0) {
      int error = Sync(path);
      if (error == 0) {
        char* slash = std::strrchr(path, '/');
        if (slash == path) {
          slash[1] = '\0';
        } else if (slash) {
          *slash = '\0';
        } else {
          path[0] = '.';
          path[1] = '\0';
        }
        error = Sync(path);
      }
      Send(Report{kAlso, 0, error, 0, 0, 0});
    }
    Send(Report{kDone, 0, 0, 0, 0, 0});
    ::_exit(0);
  }

  // One sync of every log that grew since its last.
  void Round() {
    for (size_t i = 0; i < count_; ++i) {
      ChildLog& log = logs_[i];
      struct stat st;
      if (log.off || ::fstat(log.fd, &st) != 0) continue;
      // Appended only: its size is every byte written to it so far.
      const uint64_t size = static_cast<uint64_t>(st.st_size);
      if (size == log.synced) continue;
      Send(Report{kBegin, log.rank, 0, 0, 0, 0});
      int failed = 0;
      while (::fdatasync(log.fd) != 0) {
        if (errno == EINTR) continue;
        failed = errno;
        break;
      }
      const int64_t now = NowMicros();
      Send(Report{kEnd, log.rank, 0, 0, 0, 0});
      if (failed != 0 && clip::SaysNothingOfTheDisk(failed)) {
        log.off = true;
        continue;
      }
      if (failed != 0) {
        Send(Report{kFailed, log.rank, failed, 0, size > log.synced ? size - log.synced : 0,
                    now - log.synced_us});
      } else {
        log.synced_us = now;
      }
      log.synced = size;  // a failed sync's bytes are counted once, as unsure
    }
  }

  // fsync(2) of a file or folder by name: 0 or the errno that says the disk failed (the rule of
  // clip::SyncToDisk, whose strings this process may not allocate).
  static int Sync(const char* path) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return clip::SaysNothingOfTheDisk(errno) ? 0 : errno;
    int error = 0;
    while (::fsync(fd) != 0) {
      if (errno == EINTR) continue;
      if (!clip::SaysNothingOfTheDisk(errno)) error = errno;
      break;
    }
    ::close(fd);
    return error;
  }

  void Send(const Report& report) {
    if (!WriteWhole(reports_, &report, sizeof report)) ::_exit(0);  // dtrain is gone
  }

  int commands_;
  int reports_;
  const int64_t interval_us_;
  ChildLog* logs_;
  size_t count_ = 0;
};

}  // namespace

struct LogSync::State {
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<int, std::string> paths;  // rank -> its log, as watched
  bool done = false;                 // the last sync returned, or the process is gone
  std::string also_error;
  bool busy = false;  // a sync under way
  int busy_rank = 0;
  std::chrono::steady_clock::time_point busy_since;
  bool stuck_said = false;
  std::optional<LogSyncFailure> first;
  bool first_taken = false;
  uint64_t unsure = 0;
};

namespace {

void ReadReports(const std::shared_ptr<LogSync::State>& s, int fd) {
  Report r;
  while (ReadWhole(fd, &r, sizeof r)) {
    std::lock_guard<std::mutex> lock(s->mu);
    switch (r.kind) {
      case kBegin:
        s->busy = true;
        s->busy_rank = r.rank;
        s->busy_since = std::chrono::steady_clock::now();
        break;
      case kEnd:
        s->busy = false;
        break;
      case kFailed:
        s->unsure += r.bytes;
        if (!s->first) {
          s->first = LogSyncFailure{r.rank, s->paths[r.rank], std::strerror(r.error), r.bytes,
                                    static_cast<double>(r.since_us) / 1e6};
        }
        break;
      case kAlso:
        s->also_error = r.error == 0 ? "" : std::strerror(r.error);
        break;
      case kDone:
        s->done = true;
        s->cv.notify_all();
        break;
    }
  }
  ::close(fd);
  std::lock_guard<std::mutex> lock(s->mu);
  s->done = true;
  s->cv.notify_all();
}

}  // namespace

LogSync::LogSync(double interval_s) : state_(std::make_shared<State>()) {
  int commands[2];
  int reports[2];
  if (::pipe2(commands, O_CLOEXEC) != 0) return;
  if (::pipe2(reports, O_CLOEXEC) != 0) {
    ::close(commands[0]);
    ::close(commands[1]);
    return;
  }
  // The syncing process's table, in its own copy of this memory; this one goes once it is forked.
  const std::unique_ptr<ChildLog[]> child_logs(new ChildLog[kMaxLogs]);
  const auto interval_us = static_cast<int64_t>(interval_s * 1e6);
  const pid_t parent = ::getpid();
  child_ = ::fork();
  if (child_ == 0) {
    ::close(commands[1]);
    ::close(reports[0]);
    SyncingProcess(commands[0], reports[1], interval_us, child_logs.get()).Run(parent);
  }
  ::close(commands[0]);
  ::close(reports[1]);
  if (child_ < 0) {
    ::close(commands[1]);
    ::close(reports[0]);
    return;
  }
  commands_ = commands[1];
  // A command that does not fit in the pipe now (the process stuck in a sync) is dropped, not
  // waited for.
  ::fcntl(commands_, F_SETFL, O_NONBLOCK);
  reader_ = std::thread([s = state_, fd = reports[0]] { ReadReports(s, fd); });
}

LogSync::~LogSync() {
  if (!finished_) Finish(kLastSyncWaitS);
}

namespace {

bool SendCommand(int fd, CommandKind kind, int rank, const std::string& path) {
  if (fd < 0 || path.size() > kMaxPath) return false;
  char buffer[PIPE_BUF];
  const CommandHead head{kind, rank, static_cast<uint32_t>(path.size())};
  std::memcpy(buffer, &head, sizeof head);
  std::memcpy(buffer + sizeof head, path.data(), path.size());
  const size_t size = sizeof head + path.size();
  ssize_t n;
  while ((n = ::write(fd, buffer, size)) < 0 && errno == EINTR) {
  }
  return n == static_cast<ssize_t>(size);
}

}  // namespace

void LogSync::Watch(int rank, const std::string& path) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (finished_ || state_->paths.count(rank)) return;
  if (SendCommand(commands_, kWatch, rank, path)) state_->paths[rank] = path;
}

std::optional<LogSyncFailure> LogSync::TakeFirstFailure() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->first || state_->first_taken) return std::nullopt;
  state_->first_taken = true;
  return state_->first;
}

std::optional<LogSyncStuck> LogSync::TakeStuck(double after_s) {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->busy || state_->stuck_said) return std::nullopt;
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - state_->busy_since).count();
  if (s < after_s) return std::nullopt;
  state_->stuck_said = true;
  return LogSyncStuck{state_->busy_rank, state_->paths[state_->busy_rank], s};
}

uint64_t LogSync::unsure_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->unsure;
}

std::string LogSync::error() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->first ? state_->first->error : "";
}

LogSyncEnd LogSync::Finish(double wait_s, const std::string& also) {
  LogSyncEnd end;
  if (finished_) return end;
  finished_ = true;
  if (child_ < 0) return end;
  std::unique_lock<std::mutex> lock(state_->mu);
  const bool sent = SendCommand(commands_, kFinish, 0, also);
  end.returned = sent && state_->cv.wait_for(lock, std::chrono::duration<double>(wait_s),
                                             [&] { return state_->done; });
  end.also_error = state_->also_error;
  lock.unlock();
  ::close(commands_);  // the process ends on it, unless it is stuck in a sync
  commands_ = -1;
  if (end.returned) {
    reader_.join();
    ::waitpid(child_, nullptr, 0);  // it exits right after its last report
  } else {
    reader_.detach();  // it holds the state; it ends with the process, or with dtrain
  }
  return end;
}

}  // namespace dtrain
