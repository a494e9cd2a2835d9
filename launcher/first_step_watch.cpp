#include "launcher/first_step_watch.h"

#include <sys/stat.h>

#include <cstdio>

#include "launcher/rank_log.h"

namespace dtrain {

FirstStepWatch::FirstStepWatch(std::string metrics_path) : path_(std::move(metrics_path)) {
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) offset_ = static_cast<uint64_t>(st.st_size);
}

void FirstStepWatch::Tick() {
  const auto now = std::chrono::steady_clock::now();
  if (first_step_us_ != 0 || now < next_) return;
  next_ = now + std::chrono::milliseconds(500);
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
  for (size_t end; (end = partial_.find('\n')) != std::string::npos; partial_.erase(0, end + 1)) {
    if (partial_.compare(0, end, "") != 0 &&
        partial_.substr(0, end).find("\"step\"") != std::string::npos) {
      first_step_us_ = WallMicros();
      partial_.clear();
      return;
    }
  }
}

}  // namespace dtrain
