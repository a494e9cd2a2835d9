// A job's processes are found in /proc by their environment (/proc/PID/environ, as they were
// started): DTRAIN_LOG_DIR, the job's own folder; only this process's children (field 4 of
// /proc/PID/stat) are killed, the others are waited for until they are handed over.
#include "launcher/local/rank_orphans.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <utility>

namespace dtrain {
namespace {

// Field 4 (ppid) of /proc/PID/stat; -1 when it cannot be read, or when the process is a zombie and
// `live_only`. The command name (field 2) may hold spaces and parentheses, so parsing starts
// after its last ')'. The file is read with getline, which takes a failed read as the end of the
// stream: a process reaped between the opening and the reading makes read() fail with ESRCH, which
// an istreambuf_iterator would throw out of the filebuf and end dtrain.
pid_t ParentOf(const std::string& pid, bool live_only = false) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return -1;
  if (live_only && stat[close + 2] == 'Z') return -1;
  return static_cast<pid_t>(std::strtol(stat.c_str() + close + 4, nullptr, 10));
}

bool HasEnvEntry(const std::string& pid, const std::set<std::string>& entries) {
  std::ifstream in("/proc/" + pid + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0')) {
    if (entries.count(entry)) return true;
  }
  return false;
}

// Calls `visit` with each process id /proc lists.
template <class Visit>
void ForEachProcess(Visit visit) {
  DIR* proc = ::opendir("/proc");
  if (!proc) return;
  while (const dirent* entry = ::readdir(proc)) {
    const std::string pid = entry->d_name;
    if (!pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos) visit(pid);
  }
  ::closedir(proc);
}

// Live processes that carry one of `entries` in their environment: (pid, is a child of this
// process). Zombies are left out: their environment cannot be read.
std::vector<std::pair<pid_t, bool>> JobProcesses(const std::set<std::string>& entries) {
  std::vector<std::pair<pid_t, bool>> out;
  const pid_t self = ::getpid();
  ForEachProcess([&](const std::string& pid) {
    if (HasEnvEntry(pid, entries)) out.emplace_back(std::stoi(pid), ParentOf(pid) == self);
  });
  return out;
}

// Children of this process that are not zombies.
std::vector<pid_t> LiveChildren() {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  ForEachProcess([&](const std::string& pid) {
    if (ParentOf(pid, true) == self) out.push_back(std::stoi(pid));
  });
  return out;
}

// SIGKILL to `pid` and to its process group, unless that is this process's own.
void KillWithItsGroup(pid_t pid) {
  ::kill(pid, SIGKILL);
  const pid_t group = ::getpgid(pid);
  if (group > 1 && group != ::getpgrp()) ::kill(-group, SIGKILL);
}

}  // namespace

void KillAdoptedChildren() {
  int subreaper = 0;
  if (::prctl(PR_GET_CHILD_SUBREAPER, &subreaper) != 0 || subreaper == 0) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    // A child that died is reaped; what it had started was handed to this process already.
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    const std::vector<pid_t> left = LiveChildren();
    if (left.empty() || std::chrono::steady_clock::now() >= until) return;
    for (pid_t pid : left) KillWithItsGroup(pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void RankOrphans::Adopt(const std::vector<ProcessSpec>& procs) {
  for (const ProcessSpec& proc : procs) {
    const auto job = proc.env.find("DTRAIN_LOG_DIR");
    if (job != proc.env.end()) jobs_.insert("DTRAIN_LOG_DIR=" + job->second);
  }
  if (!jobs_.empty()) ::prctl(PR_SET_CHILD_SUBREAPER, 1);
}

void RankOrphans::KillAll() const {
  if (jobs_.empty()) return;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  std::set<pid_t> dying;  // killed, not reaped yet
  for (;;) {
    // A job process that is not a child yet is a rank's descendant whose parent is dying: it
    // comes to this process next.
    const std::vector<std::pair<pid_t, bool>> left = JobProcesses(jobs_);
    for (const auto& [pid, child] : left) {
      if (!child) continue;
      KillWithItsGroup(pid);
      dying.insert(pid);
    }
    for (auto it = dying.begin(); it != dying.end();) {
      it = ::waitpid(*it, nullptr, WNOHANG) != 0 ? dying.erase(it) : std::next(it);
    }
    if ((left.empty() && dying.empty()) || std::chrono::steady_clock::now() >= until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace dtrain
