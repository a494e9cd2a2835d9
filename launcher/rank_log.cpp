// Writes each chunk with write(2) straight away: what a rank printed is on disk before the next
// chunk is read, so nothing is lost when a rank (or dtrain) dies.
#include "launcher/rank_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

int OpenForAppend(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
  return fd;
}

void WriteAll(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": cannot write: " + std::strerror(errno));
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

std::string RankLogPath(const std::string& job_dir, int rank) {
  return fmt::format("{}/rank-{}.log", job_dir, rank);
}

std::string RankIndexPath(const std::string& job_dir, int rank) {
  return fmt::format("{}/rank-{}.idx", job_dir, rank);
}

int64_t WallMicros() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

RankLog::RankLog(const std::string& job_dir, int rank)
    : log_path_(RankLogPath(job_dir, rank)), index_path_(RankIndexPath(job_dir, rank)) {
  log_fd_ = OpenForAppend(log_path_);
  index_fd_ = OpenForAppend(index_path_);
  struct stat st;
  if (::fstat(log_fd_, &st) == 0 && st.st_size > 0) {
    offset_ = static_cast<uint64_t>(st.st_size);
    char last = '\n';
    at_line_start_ = ::pread(log_fd_, &last, 1, st.st_size - 1) != 1 || last == '\n';
  }
}

RankLog::~RankLog() {
  if (log_fd_ >= 0) ::close(log_fd_);
  if (index_fd_ >= 0) ::close(index_fd_);
}

void RankLog::Append(std::string_view bytes, int64_t now_us) {
  if (bytes.empty()) return;
  // Every line that starts in this chunk arrived now, so one entry (the first line start) times
  // them all; a reader gives each line the time of the nearest entry at or before it.
  size_t first_start = std::string_view::npos;
  if (at_line_start_) {
    first_start = 0;
  } else if (size_t nl = bytes.find('\n'); nl != std::string_view::npos && nl + 1 < bytes.size()) {
    first_start = nl + 1;
  }
  // The index goes first: a reader that sees a line in the log also sees its time.
  if (first_start != std::string_view::npos) {
    WriteAll(index_fd_, fmt::format("{} {}\n", offset_ + first_start, now_us), index_path_);
  }
  WriteAll(log_fd_, bytes, log_path_);
  offset_ += bytes.size();
  at_line_start_ = bytes.back() == '\n';
}

void RankLog::MarkRestart(const std::string& what, int64_t now_us) {
  Append(fmt::format("{}--- dtrain: {} ---\n", at_line_start_ ? "" : "\n", what), now_us);
}

}  // namespace dtrain
