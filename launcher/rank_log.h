// The file a rank's output lands in: <job_dir>/rank-R.log holds exactly the bytes the rank wrote,
// appended unbuffered as they arrive (after a restart, one line of dtrain's own marks where the
// next attempt begins); the sidecar rank-R.idx holds "OFFSET MICROS" text lines
// (a line start's byte offset in the log, its wall-clock arrival in microseconds since the epoch)
// for the first line starting in each chunk received; the lines after it in the log, up to the
// next entry, arrived with it. That is how `dtrain logs` interleaves ranks in time order.
// A write the disk refuses (full, an I/O error) does not end the job: what it held is counted as
// lost, and the first write the disk takes again begins with a line that marks the gap.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dtrain {

std::string RankLogPath(const std::string& job_dir, int rank);
std::string RankIndexPath(const std::string& job_dir, int rank);

// Microseconds since the epoch on the wall clock (one clock for every rank's lines).
int64_t WallMicros();

// One rank's log and index, opened for appending (a restarted job continues the same files).
// Throws Error naming the path when a file cannot be opened; a write never throws (`failing`).
class RankLog {
 public:
  RankLog(const std::string& job_dir, int rank);
  ~RankLog();
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  // Empty `bytes` after lost ones (failing()): the gap's mark alone.
  void Append(std::string_view bytes, int64_t now_us);
  // Before the output of a restart: the line "--- dtrain: WHAT ---" ("restart 1 of 3"), on a line
  // of its own even when the last attempt ended mid-line.
  void MarkRestart(const std::string& what, int64_t now_us);
  // `bytes` of the rank's output that never reached this log (`why`: "dtrain held ... in memory"):
  // counted as lost, and marked before the next bytes written, as a refused write's are.
  void Lose(uint64_t bytes, const std::string& why);
  const std::string& path() const { return log_path_; }
  uint64_t size() const { return offset_; }  // bytes in the log so far
  // Why the disk refused the last write ("No space left on device"); "" once it took one.
  const std::string& failing() const { return error_; }
  uint64_t lost_bytes() const { return lost_bytes_; }  // the rank's bytes never written, in all
  uint64_t gap_bytes() const { return gap_bytes_; }    // those of them not marked in the log yet

 private:
  std::string log_path_;
  std::string index_path_;
  int log_fd_ = -1;
  int index_fd_ = -1;
  uint64_t offset_ = 0;
  bool at_line_start_ = true;
  bool index_line_cut_ = false;  // the last index entry was cut short by a refused write
  std::string error_;
  uint64_t gap_bytes_ = 0;  // lost since the last mark
  uint64_t lost_bytes_ = 0;
};

}  // namespace dtrain
