// The cgroup v2 hierarchy is found through /proc/self/mounts (the first cgroup2 mount:
// /sys/fs/cgroup on a unified system, /sys/fs/cgroup/unified on a hybrid one) and this process's
// place in it through the "0::" line of /proc/self/cgroup.
#include "launcher/local/rank_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

namespace dtrain {
namespace {

std::string Cgroup2Mount() {
  std::ifstream mounts("/proc/self/mounts");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream words(line);
    std::string device, where, type;
    if (words >> device >> where >> type && type == "cgroup2") return where;
  }
  return "";
}

std::string OwnCgroupPath() {
  std::ifstream cgroup("/proc/self/cgroup");
  std::string line;
  while (std::getline(cgroup, line)) {
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  }
  return "";
}

bool WriteFile(const std::string& path, const char* text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t want = static_cast<ssize_t>(std::char_traits<char>::length(text));
  const bool ok = ::write(fd, text, want) == want;
  ::close(fd);
  return ok;
}

constexpr const char* kPrefix = "dtrain-rank-";

// The cgroups of earlier dtrain processes that were killed outright (SIGKILL, the OOM killer)
// and so never removed theirs: each is named after its dtrain's pid, and one whose dtrain is gone
// is removed when empty (a cgroup that still holds a process cannot be).
void RemoveStaleRankCgroups(const std::string& parent) {
  DIR* dir = ::opendir(parent.c_str());
  if (!dir) return;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name.rfind(kPrefix, 0) != 0) continue;
    const pid_t owner = static_cast<pid_t>(std::atol(name.c_str() + std::strlen(kPrefix)));
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH)
      ::rmdir((parent + "/" + name).c_str());
  }
  ::closedir(dir);
}

// This process's cgroup as a folder ("" without cgroup v2), found once per process, when the
// stale cgroups beside it are removed too: each spawn then only makes its own.
const std::string& RankCgroupParent() {
  static const std::string parent = [] {
    const std::string mount = Cgroup2Mount();
    std::string own = OwnCgroupPath();
    if (mount.empty() || own.empty() || own[0] != '/') return std::string();
    if (own.back() == '/') own.pop_back();
    struct stat info;
    if (::stat((mount + own).c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) return std::string();
    RemoveStaleRankCgroups(mount + own);
    return mount + own;
  }();
  return parent;
}

}  // namespace

RankCgroup::RankCgroup(const std::string& suffix) {
  const std::string& parent = RankCgroupParent();
  if (parent.empty()) return;
  const std::string dir = parent + "/" + kPrefix + std::to_string(::getpid()) + "-" + suffix;
  if (::mkdir(dir.c_str(), 0755) != 0) return;
  dir_ = dir;
  procs_file_ = dir + "/cgroup.procs";
}

RankCgroup::~RankCgroup() {
  Remove();
}

RankCgroup::RankCgroup(RankCgroup&& other) noexcept
    : dir_(std::exchange(other.dir_, {})), procs_file_(std::exchange(other.procs_file_, {})) {}

RankCgroup& RankCgroup::operator=(RankCgroup&& other) noexcept {
  if (this != &other) {
    Remove();
    dir_ = std::exchange(other.dir_, {});
    procs_file_ = std::exchange(other.procs_file_, {});
  }
  return *this;
}

bool RankCgroup::Kill() const {
  return ok() && WriteFile(dir_ + "/cgroup.kill", "1");
}

void RankCgroup::Remove() {
  if (!ok()) return;
  Kill();
  // A killed process leaves its cgroup as it exits; one stuck in the kernel keeps it, and then
  // the empty-to-be cgroup is left behind rather than dtrain waiting on it.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (::rmdir(dir_.c_str()) != 0 && errno == EBUSY && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  dir_.clear();
  procs_file_.clear();
}

void JoinCgroup(const char* procs_file) {
  if (!procs_file || !*procs_file) return;
  const int fd = ::open(procs_file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  [[maybe_unused]] const ssize_t n = ::write(fd, "0", 1);
  ::close(fd);
}

}  // namespace dtrain
