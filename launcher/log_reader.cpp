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
#include <thread>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/job_record.h"
#include "launcher/rank_log.h"

namespace dtrain {
namespace {

// Bytes of `path` from `offset` to its current end ("" if it cannot be read).
std::string ReadFrom(const std::string& path, uint64_t offset) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(offset + out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

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

// "running" for a job whose launcher on this machine is gone is really "lost".
std::string EffectiveStatus(const JobSummary& job) {
  if (job.status != "running" || job.launcher_pid <= 0) return job.status;
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  if (job.launcher_host == host && ::kill(job.launcher_pid, 0) != 0 && errno == ESRCH) {
    return "lost";
  }
  return job.status;
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

void PrintLines(const std::vector<LogLine>& lines, bool prefixed,
                const std::map<int, std::string>& hosts, std::FILE* out) {
  std::string text;
  for (const LogLine& line : lines) {
    if (prefixed) {
      auto host = hosts.find(line.rank);
      text += fmt::format("[{}:{}] ", host == hosts.end() ? "?" : host->second, line.rank);
    }
    text += line.text;
    text += '\n';
  }
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

// Reads every cursor and merges the lines by arrival time (per-rank order kept).
std::vector<LogLine> ReadMerged(std::vector<RankLogCursor>& cursors, bool final) {
  std::vector<LogLine> lines;
  for (RankLogCursor& cursor : cursors) {
    std::vector<LogLine> more = cursor.ReadNew(final);
    lines.insert(lines.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  }
  std::stable_sort(lines.begin(), lines.end(), [](const LogLine& a, const LogLine& b) {
    return a.time_us != b.time_us ? a.time_us < b.time_us : a.rank < b.rank;
  });
  return lines;
}

}  // namespace

RankLogCursor::RankLogCursor(const std::string& job_dir, int rank)
    : rank_(rank),
      log_path_(RankLogPath(job_dir, rank)),
      index_path_(RankIndexPath(job_dir, rank)) {}

void RankLogCursor::ReadIndex() {
  std::string text = ReadFrom(index_path_, index_offset_);
  size_t end = text.rfind('\n');
  if (end == std::string::npos) return;
  index_offset_ += end + 1;
  size_t start = 0;
  while (start <= end) {
    size_t nl = text.find('\n', start);
    unsigned long long offset = 0;
    long long micros = 0;
    if (std::sscanf(text.c_str() + start, "%llu %lld", &offset, &micros) == 2) {
      index_.emplace_back(offset, micros);
    }
    start = nl + 1;
  }
}

int64_t RankLogCursor::TimeOf(uint64_t offset) {
  while (!index_.empty() && index_.front().first < offset) {
    last_time_ = std::max(last_time_, index_.front().second);
    index_.pop_front();
  }
  if (!index_.empty() && index_.front().first == offset) {
    last_time_ = std::max(last_time_, index_.front().second);
    index_.pop_front();
  }
  return last_time_;  // lines without an entry arrived with the entry before them
}

std::vector<LogLine> RankLogCursor::ReadNew(bool final) {
  ReadIndex();  // the index is written before the log, so it covers every line read below
  std::string text = ReadFrom(log_path_, log_offset_);
  std::vector<LogLine> lines;
  size_t start = 0;
  for (size_t nl = text.find('\n'); nl != std::string::npos; nl = text.find('\n', start)) {
    lines.push_back({TimeOf(log_offset_ + start), rank_, text.substr(start, nl - start)});
    start = nl + 1;
  }
  if (final && start < text.size()) {
    lines.push_back({TimeOf(log_offset_ + start), rank_, text.substr(start)});
    start = text.size();
  }
  log_offset_ += start;
  return lines;
}

std::vector<std::string> LastLines(const std::string& path, int count, uint64_t first_byte) {
  struct stat st;
  if (count <= 0 || ::stat(path.c_str(), &st) != 0) return {};
  // A window from the end large enough for `count` ordinary lines.
  const uint64_t window = static_cast<uint64_t>(count) * 1024;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t from = std::max(first_byte, size > window ? size - window : 0);
  std::string text = ReadFrom(path, from);
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
  std::vector<RankLogCursor> cursors;
  for (int r : ranks) cursors.emplace_back(job_dir, r);

  auto job_over = [&] {
    if (!have_record) return true;
    try {
      return EffectiveStatus(ReadJobSummary(job_dir)) != "running";
    } catch (const Error&) {
      return true;
    }
  };
  bool over = !options.follow || job_over();
  std::vector<LogLine> lines = ReadMerged(cursors, over);
  if (options.tail >= 0 && lines.size() > static_cast<size_t>(options.tail)) {
    lines.erase(lines.begin(), lines.end() - options.tail);
  }
  PrintLines(lines, prefixed, hosts, out);
  while (!over) {
    std::this_thread::sleep_for(std::chrono::duration<double>(options.poll_interval_s));
    over = job_over();  // checked before reading, so the last read sees everything
    PrintLines(ReadMerged(cursors, over), prefixed, hosts, out);
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
