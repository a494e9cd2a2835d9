#include "launcher/open_to_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace dtrain {

int OpenToRead(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOATIME);
  if (fd >= 0 || errno != EPERM) return fd;
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // not the file's owner
}

std::optional<std::string> ReadToEnd(const std::string& path, uint64_t offset) {
  const int fd = OpenToRead(path);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::pread(fd, buffer, sizeof buffer, static_cast<off_t>(offset + text.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

}  // namespace dtrain
