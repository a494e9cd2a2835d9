// Reading what jobs left (`dtrain logs`): one rank's log, several ranks interleaved in time order
// through the rank-R.idx sidecars, the tail, following a running job, the list of jobs.
// Job names from the user are checked to be one path component inside the log dir.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace dtrain {

struct LogLine {
  int64_t time_us = 0;  // when dtrain received the line's first byte
  int rank = 0;
  std::string text;  // without the newline
};

// Reads the lines one rank's log gains over time, with their arrival times.
class RankLogCursor {
 public:
  RankLogCursor(const std::string& job_dir, int rank);
  // Lines completed since the last call; with `final`, also an unterminated last line.
  std::vector<LogLine> ReadNew(bool final);

 private:
  void ReadIndex();
  int64_t TimeOf(uint64_t offset);

  int rank_;
  std::string log_path_;
  std::string index_path_;
  uint64_t log_offset_ = 0;
  uint64_t index_offset_ = 0;
  std::deque<std::pair<uint64_t, int64_t>> index_;  // (line offset, micros), oldest first
  int64_t last_time_ = 0;
};

// The last `count` lines of a file after byte `first_byte` (fewer if it has fewer); empty if it
// cannot be read.
std::vector<std::string> LastLines(const std::string& path, int count, uint64_t first_byte = 0);

// <log_dir>/<job>, with `job` checked to stay inside `log_dir`. Empty `job`: the job `latest`
// points at, else the newest job. Throws Error when there is no such job.
std::string ResolveJobDir(const std::string& log_dir, const std::string& job);

struct LogsOptions {
  std::string log_dir;
  std::string job;
  std::vector<int> ranks;  // empty: every rank of the job
  int tail = -1;           // < 0: everything
  bool follow = false;
  double poll_interval_s = 0.2;
};

// Prints the job's logs to `out`: one rank as written, several as "[node:R] line" in time order.
void ShowLogs(const LogsOptions& options, std::FILE* out);
// Prints one line per job in `log_dir`: name, status, ranks, start, duration, exit status.
void ListJobs(const std::string& log_dir, std::FILE* out);

}  // namespace dtrain
