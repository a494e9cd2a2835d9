#include "runtime/train/checkpoint_parts.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace dtrain::clip {
namespace {

// The writer's pid of a part of `host` named NAME.pt.tmp.HOST.PID; 0 when the name is not one.
long PartWriter(const std::string& name, const std::string& host) {
  const size_t tmp = name.find(".pt.tmp.");
  if (tmp == std::string::npos) return 0;
  const std::string rest = name.substr(tmp + 8);  // HOST.PID (a host name may hold dots)
  const size_t dot = rest.rfind('.');
  if (dot == std::string::npos || rest.substr(0, dot) != host) return 0;
  const std::string pid = rest.substr(dot + 1);
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return 0;
  return std::strtol(pid.c_str(), nullptr, 10);
}

std::string HostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

bool Alive(long pid) {
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace

std::string CheckpointPartPath(const std::string& path) {
  return path + ".tmp." + HostName() + "." + std::to_string(getpid());
}

RemovedCheckpointParts RemoveAbandonedCheckpointParts(const std::string& dir) {
  RemovedCheckpointParts removed;
  const std::string host = HostName();
  DIR* folder = opendir(dir.c_str());
  if (!folder) return removed;
  while (const dirent* entry = readdir(folder)) {
    const std::string name = entry->d_name;
    const long pid = PartWriter(name, host);
    if (pid <= 0 || Alive(pid)) continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (std::remove(path.c_str()) == 0) {
      removed.paths.push_back(path);
      removed.bytes += static_cast<uint64_t>(st.st_size);
    }
  }
  closedir(folder);
  return removed;
}

}  // namespace dtrain::clip
