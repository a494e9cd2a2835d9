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

namespace dtrain::clip {

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
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error(path + ": cannot open metrics file: " + std::strerror(errno));
  }
  out_ = LineAppender(fd);
  path_ = path;
}

void MetricsLog::Write(const MetricsLine& line) {
  if (!out_.is_open()) return;
  const LineAppender::Result result = out_.Append(line.ToJson());
  if (result.change == LineAppender::Change::kTakenAgain) {
    std::fprintf(stderr, "dtrain-clip: metrics are written to %s again; %llu line(s) lost\n",
                 path_.c_str(), static_cast<unsigned long long>(result.gap_lines));
  } else if (result.change == LineAppender::Change::kRefused) {
    std::fprintf(stderr,
                 "dtrain-clip: warning: %s: cannot write metrics: %s; training goes on, and "
                 "metrics lines are lost until the disk takes them again\n",
                 path_.c_str(), result.error.c_str());
  }
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
