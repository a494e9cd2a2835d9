// The file a rank's output lands in: <job_dir>/rank-R.log holds exactly the bytes the rank wrote,
// appended unbuffered as they arrive (after a restart, one line of dtrain's own marks where the
// next attempt begins); the sidecar rank-R.idx holds "OFFSET MICROS" text lines
// (a line start's byte offset in the log, its wall-clock arrival in microseconds since the epoch)
// for the first line starting in each chunk received; the lines after it in the log, up to the
// next entry, arrived with it. That is how `dtrain logs` interleaves ranks in time order.
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
// Throws Error naming the path when a file cannot be opened or written.
class RankLog {
 public:
  RankLog(const std::string& job_dir, int rank);
  ~RankLog();
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;

  void Append(std::string_view bytes, int64_t now_us);
  // Before the output of a restart: the line "--- dtrain: WHAT ---" ("restart 1 of 3"), on a line
  // of its own even when the last attempt ended mid-line.
  void MarkRestart(const std::string& what, int64_t now_us);
  const std::string& path() const { return log_path_; }
  uint64_t size() const { return offset_; }  // bytes in the log so far

 private:
  std::string log_path_;
  std::string index_path_;
  int log_fd_ = -1;
  int index_fd_ = -1;
  uint64_t offset_ = 0;
  bool at_line_start_ = true;
};

}  // namespace dtrain
