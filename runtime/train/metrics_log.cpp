#include "runtime/train/metrics_log.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace dtrain::clip {
MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
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
  file_ = std::fopen(path.c_str(), "a");
  if (!file_) {
    throw std::runtime_error(path + ": cannot open metrics file: " + std::strerror(errno));
  }
  path_ = path;
}

void MetricsLog::Write(const MetricsLine& line) {
  if (!file_) return;
  std::string json = line.ToJson() + "\n";
  std::fwrite(json.data(), 1, json.size(), file_);
  std::fflush(file_);
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
