#include "runtime/formats/file_sync.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dtrain::clip {

bool SaysNothingOfTheDisk(int error) {
  return error == EINVAL || error == ENOTSUP || error == EOPNOTSUPP || error == ENOSYS ||
         error == EACCES || error == EPERM;
}

size_t WriteWhatTheDiskTakes(int fd, std::string_view bytes, std::string& error) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = std::strerror(n < 0 ? errno : EIO);
      break;
    }
    done += static_cast<size_t>(n);
  }
  return done;
}

std::string SyncToDisk(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return SaysNothingOfTheDisk(errno) ? "" : std::strerror(errno);
  std::string why;
  if (::fsync(fd) != 0 && !SaysNothingOfTheDisk(errno)) why = std::strerror(errno);
  ::close(fd);
  return why;
}

std::string FolderOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace dtrain::clip
