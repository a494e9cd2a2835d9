#include "launcher/step_watch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "launcher/open_to_read.h"
#include "launcher/rank_log.h"

namespace dtrain {

MetricsStep ReadMetricsStep(const std::string& line) {
  MetricsStep m;
  const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
  if (!doc.is_object()) return m;
  if (auto step = doc.find("step"); step != doc.end() && step->is_number_integer()) {
    m.step = std::max<int64_t>(-1, step->get<int64_t>());
  }
  if (auto us = doc.find("time_us"); us != doc.end() && us->is_number_integer()) {
    m.time_us = us->get<int64_t>();
  } else if (auto s = doc.find("time"); s != doc.end() && s->is_number()) {
    m.time_us = static_cast<int64_t>(s->get<double>() * 1e6);
  }
  return m;
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
  const int fd = OpenToRead(path_);
  std::FILE* file = fd < 0 ? nullptr : ::fdopen(fd, "rb");
  if (!file) {
    if (fd >= 0) ::close(fd);
    return;
  }
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
    const int64_t step = ReadMetricsStep(partial_.substr(0, end)).step;
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
