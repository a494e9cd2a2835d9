// Reads rank logs incrementally (offset cursors over rank-R.log and rank-R.idx), merges ranks by
// arrival time, and lists jobs from their job.json records.
#include "launcher/log_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/job_record.h"
#include "launcher/open_to_read.h"
#include "launcher/rank_log.h"
#include "launcher/this_machine.h"

namespace dtrain {
namespace {

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Names of the job folders in `log_dir` (those holding a job.json), unsorted.
std::vector<std::string> JobNames(const std::string& log_dir) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(log_dir.c_str());
  if (!dir) return names;
  while (dirent* entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.empty() || name[0] == '.' || name == "latest") continue;
    struct stat st;
    if (::lstat((log_dir + "/" + name).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (::access(JobRecordPath(log_dir + "/" + name).c_str(), R_OK) == 0) names.push_back(name);
  }
  ::closedir(dir);
  return names;
}

std::string FormatTime(int64_t micros) {
  if (micros <= 0) return "-";
  std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

std::string FormatDuration(int64_t micros) {
  if (micros < 0) return "-";
  int64_t s = micros / 1000000;
  if (s < 60) return fmt::format("{}.{}s", s, (micros / 100000) % 10);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s / 60) % 60);
}

// The ranks to show: those asked for (checked against the job), else every rank of the job.
std::vector<int> RanksToShow(const std::string& job_dir, const std::vector<int>& asked,
                             const std::map<int, std::string>& hosts) {
  std::vector<int> all;
  for (const auto& [rank, host] : hosts) all.push_back(rank);
  if (all.empty()) {  // no record: whatever logs are there
    for (int r = 0; ::access(RankLogPath(job_dir, r).c_str(), R_OK) == 0; ++r) all.push_back(r);
  }
  if (asked.empty()) return all;
  for (int r : asked) {
    if (std::find(all.begin(), all.end(), r) == all.end()) {
      throw UsageError(fmt::format("--rank {}: job {} has ranks 0..{}", r, job_dir,
                                   all.empty() ? -1 : all.back()));
    }
  }
  return asked;
}

constexpr size_t kChunk = 1 << 16;

// The cursor whose next line arrived first (ties: lower rank, so a rank keeps its order).
RankLogCursor* NextMerged(std::vector<std::unique_ptr<RankLogCursor>>& cursors, bool final,
                          LogLineSpan& line) {
  RankLogCursor* best = nullptr;
  for (auto& cursor : cursors) {
    LogLineSpan candidate;
    if (!cursor->Peek(final, candidate)) continue;
    if (!best || candidate.time_us < line.time_us ||
        (candidate.time_us == line.time_us && candidate.rank < line.rank)) {
      best = cursor.get();
      line = candidate;
    }
  }
  return best;
}

bool JobIsLive(const std::string& status) {
  return status == "running" || status == "waiting";
}

}  // namespace

std::string EffectiveStatus(const JobSummary& job) {
  if (!JobIsLive(job.status) || job.launcher_pid <= 0) return job.status;
  if (job.launcher_host == ThisHostName() && ::kill(job.launcher_pid, 0) != 0 && errno == ESRCH) {
    return "lost";
  }
  return job.status;
}

RankLogCursor::RankLogCursor(const std::string& job_dir, int rank)
    : rank_(rank),
      log_path_(RankLogPath(job_dir, rank)),
      index_path_(RankIndexPath(job_dir, rank)) {}

RankLogCursor::~RankLogCursor() {
  if (log_fd_ >= 0) ::close(log_fd_);
  if (index_fd_ >= 0) ::close(index_fd_);
}

// Both files appear when the rank starts; until then there is nothing to read.
bool RankLogCursor::Open() {
  if (index_fd_ < 0) index_fd_ = OpenToRead(index_path_);
  if (log_fd_ < 0) log_fd_ = OpenToRead(log_path_);
  return log_fd_ >= 0;
}

// Appends the index entries of the next chunk; false when the index has no complete line more.
bool RankLogCursor::ReadMoreIndex() {
  if (index_fd_ < 0) return false;
  char buf[kChunk];
  ssize_t n;
  do {
    n = ::pread(index_fd_, buf, sizeof(buf), static_cast<off_t>(index_offset_));
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  const std::string_view text(buf, static_cast<size_t>(n));
  const size_t last = text.rfind('\n');
  if (last == std::string_view::npos) {
    if (static_cast<size_t>(n) < sizeof(buf)) return false;  // a line still being written
    index_offset_ += static_cast<uint64_t>(n);  // a chunk without a line: not an index, skip it
    return true;
  }
  for (size_t start = 0; start <= last;) {
    const size_t nl = text.find('\n', start);
    unsigned long long offset = 0;
    long long micros = 0;
    const std::string entry(text.substr(start, nl - start));
    if (std::sscanf(entry.c_str(), "%llu %lld", &offset, &micros) == 2) {
      index_.emplace_back(offset, micros);
    }
    start = nl + 1;
  }
  index_offset_ += last + 1;
  return true;
}

int64_t RankLogCursor::TimeOf(uint64_t offset) {
  for (;;) {
    while (!index_.empty() && index_.front().first <= offset) {
      last_time_ = std::max(last_time_, index_.front().second);
      index_.pop_front();
    }
    if (!index_.empty() || !ReadMoreIndex()) break;
  }
  return last_time_;  // lines without an entry arrived with the entry before them
}

bool RankLogCursor::Peek(bool final, LogLineSpan& line) {
  if (peeked_) {
    line = peeked_line_;
    return true;
  }
  if (!Open()) return false;
  char buf[kChunk];
  for (;;) {
    const uint64_t at = line_begin_ + scanned_;
    ssize_t n = ::pread(log_fd_, buf, sizeof(buf), static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const void* nl = std::memchr(buf, '\n', static_cast<size_t>(n));
    if (nl) {
      scanned_ += static_cast<uint64_t>(static_cast<const char*>(nl) - buf) + 1;
      peeked_line_ = {0, rank_, line_begin_, line_begin_ + scanned_, true};
      peeked_ = true;
      break;
    }
    scanned_ += static_cast<uint64_t>(n);
  }
  if (!peeked_ && final && scanned_ > 0) {
    peeked_line_ = {0, rank_, line_begin_, line_begin_ + scanned_, false};
    peeked_ = true;
  }
  if (!peeked_) return false;
  // The index is written before the log, so it covers every line read above.
  peeked_line_.time_us = TimeOf(line_begin_);
  line = peeked_line_;
  return true;
}

void RankLogCursor::Take() {
  if (!peeked_) return;
  line_begin_ = peeked_line_.end;
  scanned_ = 0;
  peeked_ = false;
}

void RankLogCursor::Copy(const LogLineSpan& line, std::FILE* out) {
  char buf[kChunk];
  for (uint64_t at = line.begin; at < line.end;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof(buf), line.end - at));
    ssize_t n = ::pread(log_fd_, buf, want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the log shrank under us: nothing more to copy
    std::fwrite(buf, 1, static_cast<size_t>(n), out);
    at += static_cast<uint64_t>(n);
  }
}

std::vector<std::string> LastLines(const std::string& path, int count, uint64_t first_byte) {
  struct stat st;
  if (count <= 0 || ::stat(path.c_str(), &st) != 0) return {};
  // A window from the end large enough for `count` ordinary lines.
  const uint64_t window = static_cast<uint64_t>(count) * 1024;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t from = std::max(first_byte, size > window ? size - window : 0);
  std::string text = ReadToEnd(path, from).value_or("");
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  if (from > first_byte && !lines.empty()) lines.erase(lines.begin());  // cut by the window
  if (lines.size() > static_cast<size_t>(count)) lines.erase(lines.begin(), lines.end() - count);
  return lines;
}

std::string ResolveJobDir(const std::string& log_dir, const std::string& job) {
  if (!IsDirectory(log_dir)) {
    throw Error(log_dir + ": no such log directory (set it with --log-dir)");
  }
  std::string name = job;
  if (name.empty()) {
    char target[PATH_MAX];
    ssize_t n = ::readlink((log_dir + "/latest").c_str(), target, sizeof(target) - 1);
    if (n > 0) name.assign(target, static_cast<size_t>(n));
    if (name.empty() || !IsDirectory(log_dir + "/" + name)) {
      name.clear();
      int64_t newest = -1;
      for (const std::string& candidate : JobNames(log_dir)) {
        try {
          JobSummary s = ReadJobSummary(log_dir + "/" + candidate);
          if (s.started_us > newest) newest = s.started_us, name = candidate;
        } catch (const Error&) {
        }
      }
    }
    if (name.empty()) throw Error(log_dir + ": no jobs yet");
  }
  CheckJobName(name);
  const std::string dir = log_dir + "/" + name;
  const std::string real_dir = RealPath(dir);
  const std::string real_root = RealPath(log_dir);
  if (real_dir.empty() || !IsDirectory(real_dir)) {
    throw Error(
        fmt::format("no job '{}' in {} (dtrain logs --list shows the jobs)", name, log_dir));
  }
  if (real_dir.compare(0, real_root.size() + 1, real_root + "/") != 0) {
    throw UsageError(fmt::format("job '{}' is outside the log directory {}", name, log_dir));
  }
  return dir;
}

void ShowLogs(const LogsOptions& options, std::FILE* out) {
  const std::string job_dir = ResolveJobDir(options.log_dir, options.job);
  std::map<int, std::string> hosts;
  bool have_record = true;
  try {
    hosts = ReadJobSummary(job_dir).rank_hosts;
  } catch (const Error&) {
    have_record = false;
  }
  const std::vector<int> ranks = RanksToShow(job_dir, options.ranks, hosts);
  const bool prefixed = !(options.ranks.size() == 1);
  std::vector<std::unique_ptr<RankLogCursor>> cursors;
  for (int r : ranks) cursors.push_back(std::make_unique<RankLogCursor>(job_dir, r));
  std::map<int, RankLogCursor*> by_rank;
  for (size_t i = 0; i < ranks.size(); ++i) by_rank[ranks[i]] = cursors[i].get();

  // One rank is copied byte for byte; several get "[node:R] " and a newline after every line.
  auto print = [&](const LogLineSpan& line) {
    if (prefixed) {
      auto host = hosts.find(line.rank);
      std::fprintf(out, "[%s:%d] ", host == hosts.end() ? "?" : host->second.c_str(), line.rank);
    }
    by_rank[line.rank]->Copy(line, out);
    if (prefixed && !line.terminated) std::fputc('\n', out);
  };
  auto job_over = [&] {
    if (!have_record) return true;
    try {
      return !JobIsLive(EffectiveStatus(ReadJobSummary(job_dir)));
    } catch (const Error&) {
      return true;
    }
  };
  bool over = !options.follow || job_over();
  LogLineSpan line;
  if (options.tail >= 0) {
    // Only the positions of the last `tail` lines are kept, not their text.
    std::deque<LogLineSpan> last;
    while (RankLogCursor* cursor = NextMerged(cursors, over, line)) {
      cursor->Take();
      if (options.tail == 0) continue;
      if (last.size() == static_cast<size_t>(options.tail)) last.pop_front();
      last.push_back(line);
    }
    for (const LogLineSpan& kept : last) print(kept);
  } else {
    while (RankLogCursor* cursor = NextMerged(cursors, over, line)) {
      cursor->Take();
      print(line);
    }
  }
  std::fflush(out);
  while (!over) {
    std::this_thread::sleep_for(std::chrono::duration<double>(options.poll_interval_s));
    over = job_over();  // checked before reading, so the last read sees everything
    while (RankLogCursor* cursor = NextMerged(cursors, over, line)) {
      cursor->Take();
      print(line);
    }
    std::fflush(out);
  }
}

void ListJobs(const std::string& log_dir, std::FILE* out) {
  if (!IsDirectory(log_dir)) {
    throw Error(log_dir + ": no such log directory (set it with --log-dir)");
  }
  std::vector<JobSummary> jobs;
  for (const std::string& name : JobNames(log_dir)) {
    try {
      jobs.push_back(ReadJobSummary(log_dir + "/" + name));
      jobs.back().name = name;
    } catch (const Error& e) {
      std::fprintf(stderr, "dtrain: %s\n", e.what());
    }
  }
  std::sort(jobs.begin(), jobs.end(), [](const JobSummary& a, const JobSummary& b) {
    return a.started_us != b.started_us ? a.started_us < b.started_us : a.name < b.name;
  });
  std::string text = fmt::format("{:<28} {:<12} {:>5} {:<19} {:>8} {:>4}  {}\n", "JOB", "STATUS",
                                 "RANKS", "STARTED (UTC)", "TIME", "EXIT", "COMMAND");
  for (const JobSummary& job : jobs) {
    std::string command;
    for (const std::string& arg : job.command) command += (command.empty() ? "" : " ") + arg;
    const int64_t end = job.ended_us > 0 ? job.ended_us : WallMicros();
    text +=
        fmt::format("{:<28} {:<12} {:>5} {:<19} {:>8} {:>4}  {}\n", job.name, EffectiveStatus(job),
                    job.rank_hosts.size(), FormatTime(job.started_us),
                    FormatDuration(job.started_us > 0 ? end - job.started_us : -1),
                    job.exit_code < 0 ? std::string("-") : std::to_string(job.exit_code), command);
  }
  std::fwrite(text.data(), 1, text.size(), out);
}

}  // namespace dtrain
