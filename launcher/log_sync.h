// LogSync: the rank logs synced to their disk every few seconds (fdatasync(2)), so that a drive
// that failed or hangs under them is found at once. write(2) only fills the page cache: a drive
// that fell off the bus (or answers with I/O errors) is found when the kernel writes those pages
// back. ext4 aborts its journal at the next commit (5 s by default, `commit=` can make it
// minutes), and where nothing aborts, the writes go on succeeding while every writeback fails: a
// log that only grows may stay in the cache for 30 s (vm.dirty_expire_centisecs) and be lost
// without a sign. A sync finds the failure within its interval and tells how many bytes the log
// took since the last sync that succeeded: those may not be on the disk. A drive that hangs
// shows as a sync that does not return.
//
// The syncs run in a process of their own, forked at the start: a sync stuck on a hanging drive
// waits in the kernel, where no signal reaches it, and a thread stuck so would hold dtrain's own
// end until the drive answers, even where the logs' writes do not (a file system that takes
// writes into memory and blocks only their sync). The process holds neither the supervisor's
// loop, nor the ranks' output, nor dtrain's end; it ends when dtrain closes its command pipe (or
// dies), or as soon as a stuck sync returns after that.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

namespace dtrain {

// A log whose sync failed: the first of the job.
struct LogSyncFailure {
  int rank = 0;
  std::string path;
  std::string error;   // strerror: "Input/output error"
  uint64_t bytes = 0;  // the log took them since its last sync that succeeded
  double since_s = 0;  // how long before this sync that was (or its watch began)
};

// A sync that has not returned.
struct LogSyncStuck {
  int rank = 0;
  std::string path;
  double seconds = 0;
};

// What the last sync of Finish found.
struct LogSyncEnd {
  bool returned = true;    // false: it had not returned after the wait
  std::string also_error;  // the sync of the file Finish was also given: "" or why it failed
};

class LogSync {
 public:
  // Forks the syncing process; without one (fork failed) nothing is synced.
  explicit LogSync(double interval_s);
  // Finish(kLastSyncWaitS) unless it was called.
  ~LogSync();
  LogSync(const LogSync&) = delete;
  LogSync& operator=(const LogSync&) = delete;

  // Syncs rank `rank`'s log at `path` from now on, through a descriptor of its own (the file is
  // appended to by others). Once per rank; a file that cannot be opened is not synced.
  void Watch(int rank, const std::string& path);
  // The first failed sync of the job, once; the later ones are counted in unsure_bytes().
  std::optional<LogSyncFailure> TakeFirstFailure();
  // A sync under way for `after_s` seconds or more, once for the job.
  std::optional<LogSyncStuck> TakeStuck(double after_s);
  // The bytes the logs took whose sync failed (they may not be on the disk), and the first
  // failure's reason ("" when none failed).
  uint64_t unsure_bytes() const;
  std::string error() const;

  // A last sync of every log, and of `also` (a file replaced by rename: it and its folder); then
  // the syncing process ends. Waits at most `wait_s` for it; a sync still stuck then is left to
  // itself.
  LogSyncEnd Finish(double wait_s, const std::string& also = "");

  static constexpr double kLastSyncWaitS = 5;
  static constexpr double kStuckS = 10;  // a sync this long is said (TakeStuck)

  struct State;  // the reader thread's and the caller's (log_sync.cpp)

 private:
  std::shared_ptr<State> state_;
  pid_t child_ = -1;
  int commands_ = -1;   // to the syncing process
  std::thread reader_;  // its reports, into state_
  bool finished_ = false;
};

}  // namespace dtrain
