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

struct JobSummary;

// A job's status as job.json says it, but "lost" for a running (or waiting) job whose launcher
// on this machine is gone: killed, or it could not write the job's end.
std::string EffectiveStatus(const JobSummary& job);

// One line of a rank's log by position: the merge orders these and then copies the bytes, so
// no line is ever held in memory whatever its length.
struct LogLineSpan {
  int64_t time_us = 0;  // when dtrain received the line's first byte
  int rank = 0;
  uint64_t begin = 0;  // byte offsets in rank-R.log: [begin, end)
  uint64_t end = 0;
  bool terminated = false;  // ends with the rank's own '\n'
};

// Walks the lines one rank's log gains over time, with their arrival times from rank-R.idx.
// Reads both files in fixed-size chunks: memory does not grow with the log.
class RankLogCursor {
 public:
  RankLogCursor(const std::string& job_dir, int rank);
  ~RankLogCursor();
  RankLogCursor(const RankLogCursor&) = delete;
  RankLogCursor& operator=(const RankLogCursor&) = delete;

  // The next line not yet taken: a complete one, or with `final` also an unterminated rest.
  bool Peek(bool final, LogLineSpan& line);
  // Moves past the line Peek returned.
  void Take();
  // Writes the bytes of `line` to `out`.
  void Copy(const LogLineSpan& line, std::FILE* out);

 private:
  bool Open();
  bool ReadMoreIndex();
  int64_t TimeOf(uint64_t offset);

  int rank_;
  std::string log_path_;
  std::string index_path_;
  int log_fd_ = -1;
  int index_fd_ = -1;
  uint64_t line_begin_ = 0;  // where the next line starts
  uint64_t scanned_ = 0;     // bytes from line_begin_ on known to hold no '\n'
  bool peeked_ = false;
  LogLineSpan peeked_line_;
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
