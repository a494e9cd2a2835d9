// RankLogWriter: the rank logs written on a thread of their own, so that a drive that hangs under
// the job's folder holds those writes only: not the supervisor's loop (the console, the watches,
// a teardown, Ctrl-C) and not the ranks, whose output pipes would fill and stop them. On ext4 a
// write blocks at the drive's first journal commit after it hangs (the inode's buffer waits for
// the commit's I/O), however little the write is.
//
// The copies of the ranks' output beside the logs (rank_output_copy.h) are written by the same
// thread, after the log, and lose what the log loses.
//
// Appends are queued and written in order; the writer keeps up with the ranks (a write into the
// page cache takes microseconds), and Drain waits for it where the files must be whole (a failing
// rank's last lines, the end). What it holds is capped at kHeldBytes: past that an append waits
// for room (a slow drive holds the ranks back, as a full pipe does), unless a write has not
// returned for kWaitS: then it is lost, counted and marked in the log once the drive answers
// (the gap mark of rank_log.h, and the outage's lines of rank_log_outage.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "launcher/rank_log.h"
#include "launcher/rank_output_copy.h"
#include "launcher/transport.h"

namespace dtrain {

// A write that has not returned.
struct LogWriteStuck {
  int rank = 0;
  std::string what = "log";  // or "output copy" (rank_output_copy.h)
  std::string path;
  double seconds = 0;
  uint64_t held_bytes = 0;  // appends waiting behind it
};

class RankLogWriter {
 public:
  // `logs`: the job's, filled in between attempts (on the caller's thread).
  explicit RankLogWriter(std::map<int, std::unique_ptr<RankLog>>& logs);
  // Drain(kLastWaitS), then the thread ends; a thread still stuck in a write then is left, and
  // the logs with it (never freed).
  ~RankLogWriter();
  RankLogWriter(const RankLogWriter&) = delete;
  RankLogWriter& operator=(const RankLogWriter&) = delete;

  // A copy of the ranks' output (torchrun's --duplicate-*-filters, horovodrun's
  // --output-filename), given the output from now on; before any output.
  void AddCopy(std::unique_ptr<RankOutputCopy> copy);
  // Rank `rank`'s output on `stream`: to its log and the copies.
  void Output(int rank, OutputStream stream, std::string_view bytes, int64_t now_us);
  // The rank ended: the copies take its unterminated last line.
  void Finish(int rank);
  // Words of dtrain's own in rank `rank`'s log only, or a line before a restart ("--- dtrain: WHAT
  // ---"). A rank without a log is ignored.
  void Append(int rank, std::string_view bytes, int64_t now_us);
  void MarkRestart(int rank, const std::string& what, int64_t now_us);
  // Waits until everything appended is written, at most `wait_s`, and not at all while a write
  // has not returned for kWaitS (a drive that hangs): false if it was not; then what the logs say
  // of themselves (size, lost bytes) is not final.
  bool Drain(double wait_s);
  // Waits until everything appended is written, however long a drive that hangs takes.
  void DrainAll();
  // A write under way for `after_s` seconds or more, once for each hang.
  std::optional<LogWriteStuck> TakeStuck(double after_s);
  // Appends not written yet (held while a write is stuck).
  uint64_t held_bytes() const;
  // Appends lost because the memory for them was full (the drive hung) and not yet marked in
  // their logs (the mark comes with the rank's next bytes written; RankLog::lost_bytes counts
  // them then).
  uint64_t unmarked_bytes() const;

  static constexpr double kWaitS = 0.5;
  static constexpr uint64_t kHeldBytes = 64ull << 20;
  static constexpr double kLastWaitS = 5;

 private:
  struct Task;
  void Enqueue(Task task);

  struct State;
  std::map<int, std::unique_ptr<RankLog>>& logs_;
  std::shared_ptr<State> state_;  // the writer thread holds it too
  std::thread thread_;
};

}  // namespace dtrain
