#include "runtime/train/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "runtime/formats/file_sync.h"

namespace dtrain::clip {
MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MakeDirectories(const std::string& dir) {
  if (dir.empty()) return;
  std::string partial;
  size_t start = 0;
  while (start <= dir.size()) {
    size_t slash = dir.find('/', start);
    if (slash == std::string::npos) slash = dir.size();
    partial = dir.substr(0, slash);
    if (!partial.empty() && mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      throw std::runtime_error(partial + ": cannot create directory: " + std::strerror(errno));
    }
    start = slash + 1;
  }
}

void MetricsLog::Open(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash != std::string::npos) MakeDirectories(path.substr(0, slash));
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::runtime_error(path + ": cannot open metrics file: " + std::strerror(errno));
  }
  path_ = path;
}

void MetricsLog::Write(const MetricsLine& line) {
  if (fd_ < 0) return;
  // After a cut line, a newline first: the next line starts a line of its own.
  const std::string json = (cut_ ? "\n" : "") + line.ToJson() + "\n";
  std::string error;
  const size_t written = WriteWhatTheDiskTakes(fd_, json, error);
  if (written == json.size()) {
    cut_ = false;
    if (!refused_.empty()) {
      std::fprintf(stderr, "dtrain-clip: metrics are written to %s again; %llu line(s) lost\n",
                   path_.c_str(), static_cast<unsigned long long>(gap_lines_));
      refused_.clear();
      gap_lines_ = 0;
    }
    return;
  }
  cut_ = cut_ || written > 0;
  ++gap_lines_;
  ++lost_lines_;
  if (refused_.empty()) {
    std::fprintf(stderr,
                 "dtrain-clip: warning: %s: cannot write metrics: %s; training goes on, and "
                 "metrics lines are lost until the disk takes them again\n",
                 path_.c_str(), error.c_str());
  }
  refused_ = error;
}

std::string MetricsPathFor(const std::string& explicit_path, const std::string& logs, int rank) {
  if (!explicit_path.empty()) return explicit_path;
  std::string dir = logs;
  if (dir.empty()) {
    const char* env = std::getenv("DTRAIN_LOG_DIR");
    dir = env && *env ? env : "logs";
  }
  return dir + "/metrics/rank-" + std::to_string(rank) + ".jsonl";
}

}  // namespace dtrain::clip
