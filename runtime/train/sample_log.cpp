#include "runtime/train/sample_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dtrain::clip {

SampleLog::~SampleLog() {
  if (fd_ >= 0) close(fd_);
}

void SampleLog::Open(const std::string& path) {
  if (path.empty()) return;
  fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::runtime_error(path +
                             ": cannot open the --log-sample-ids file: " + std::strerror(errno));
  }
  path_ = path;
}

void SampleLog::Write(int64_t step, const std::vector<int64_t>& ids) {
  if (fd_ < 0) return;
  std::string line = std::to_string(step);
  for (int64_t id : ids) line += " " + std::to_string(id);
  line += "\n";
  if (write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error(
        path_ + ": cannot append to the --log-sample-ids file: " + std::strerror(errno));
  }
}

}  // namespace dtrain::clip
