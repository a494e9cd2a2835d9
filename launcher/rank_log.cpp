// Writes each chunk with write(2) straight away: what a rank printed is on disk before the next
// chunk is read, so nothing is lost when a rank (or dtrain) dies.
#include "launcher/rank_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "launcher/error.h"
#include "runtime/formats/file_sync.h"

namespace dtrain {
namespace {

int OpenForAppend(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
  return fd;
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
  if (bytes.empty() && error_.empty()) return;
  // After a refused write, the gap is marked before the rank's next bytes.
  std::string marked;
  if (!error_.empty()) {
    marked = fmt::format("{}--- dtrain: {} byte(s) of this rank's output lost here: {} ---\n",
                         at_line_start_ ? "" : "\n", gap_bytes_, error_);
  }
  const size_t mark_size = marked.size();
  if (!marked.empty()) {
    marked.append(bytes);
    bytes = marked;
  }
  // Every line that starts in this chunk arrived now, so one entry (the first line start) times
  // them all; a reader gives each line the time of the nearest entry at or before it.
  size_t first_start = std::string_view::npos;
  if (at_line_start_) {
    first_start = 0;
  } else if (size_t nl = bytes.find('\n'); nl != std::string_view::npos && nl + 1 < bytes.size()) {
    first_start = nl + 1;
  }
  std::string error;
  // The index goes first: a reader that sees a line in the log also sees its time. An entry the
  // disk refuses only leaves lines timed by the entry before; one cut short is ended by the next
  // entry's leading newline, so a reader skips it.
  if (first_start != std::string_view::npos) {
    const std::string entry =
        fmt::format("{}{} {}\n", index_line_cut_ ? "\n" : "", offset_ + first_start, now_us);
    const size_t n = clip::WriteWhatTheDiskTakes(index_fd_, entry, error);
    if (n > 0) index_line_cut_ = n < entry.size();  // none written: as it was
  }
  const size_t written = clip::WriteWhatTheDiskTakes(log_fd_, bytes, error);
  offset_ += written;
  if (written > 0) at_line_start_ = bytes[written - 1] == '\n';
  if (written == bytes.size()) {
    error_.clear();
    gap_bytes_ = 0;
    return;
  }
  // The rest is lost: the mark's bytes first, then the rank's.
  const uint64_t lost = bytes.size() - std::max(written, mark_size);
  gap_bytes_ = written >= mark_size && mark_size > 0 ? lost : gap_bytes_ + lost;
  lost_bytes_ += lost;
  error_ = error;
}

void RankLog::Lose(uint64_t bytes, const std::string& why) {
  gap_bytes_ += bytes;
  lost_bytes_ += bytes;
  error_ = why;
}

void RankLog::MarkRestart(const std::string& what, int64_t now_us) {
  Append(fmt::format("{}--- dtrain: {} ---\n", at_line_start_ ? "" : "\n", what), now_us);
}

}  // namespace dtrain
