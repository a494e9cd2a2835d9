#include "launcher/step_watch.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "launcher/rank_log.h"

namespace dtrain {

int64_t MetricsLineStep(const std::string& line) {
  const size_t key = line.find("\"step\"");
  if (key == std::string::npos) return -1;
  size_t at = line.find_first_not_of(" \t", key + 6);
  if (at == std::string::npos || line[at] != ':') return -1;
  at = line.find_first_not_of(" \t", at + 1);
  if (at == std::string::npos || line[at] < '0' || line[at] > '9') return -1;
  return std::strtoll(line.c_str() + at, nullptr, 10);
}

StepWatch::StepWatch(std::string metrics_path) : path_(std::move(metrics_path)) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) offset_ = static_cast<uint64_t>(st.st_size);
}

void StepWatch::Tick() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return;
  next_ = now + std::chrono::milliseconds(500);
  Read();
}

void StepWatch::Finish() {
  Read();
}

void StepWatch::Read() {
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) return;
  if (static_cast<uint64_t>(st.st_size) < offset_) offset_ = 0;  // written afresh
  if (static_cast<uint64_t>(st.st_size) == offset_) return;
  std::FILE* file = std::fopen(path_.c_str(), "rb");
  if (!file) return;
  std::fseek(file, static_cast<long>(offset_), SEEK_SET);
  char buffer[8192];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) {
    offset_ += n;
    partial_.append(buffer, n);
  }
  std::fclose(file);
  size_t end;
  while ((end = partial_.find('\n')) != std::string::npos) {
    const int64_t step = MetricsLineStep(partial_.substr(0, end));
    partial_.erase(0, end + 1);
    if (step < 0) continue;
    if (first_step_ < 0) {
      first_step_ = step;
      first_step_us_ = WallMicros();
    }
    last_step_ = step;
  }
}

}  // namespace dtrain
