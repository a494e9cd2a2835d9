#include "launcher/local/group_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace dtrain {
namespace {

// The guard holds no descriptor: not the rank's output pipe (dtrain must see it end with the
// rank) and not Subprocess's exec-error pipe (dtrain waits for it to close to know the exec
// worked).
void CloseAllDescriptors() {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 0U, ~0U, 0U) == 0) return;
#endif
  struct rlimit limit;
  rlim_t top = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
  if (top > (1 << 16)) top = 1 << 16;
  for (rlim_t fd = 0; fd < top; ++fd) ::close(static_cast<int>(fd));
}

// This process's children as /proc lists them ("pid pid ..."), at most `max`; 0 when the kernel
// has no such file. Parsed by hand: nothing here may allocate.
size_t ReadChildren(pid_t* pids, size_t max) {
  const int fd = ::open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t count = 0;
  pid_t pid = 0;
  bool in_number = false;
  char buffer[1024];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) {
    for (ssize_t i = 0; i < n; ++i) {
      if (buffer[i] >= '0' && buffer[i] <= '9') {
        pid = pid * 10 + (buffer[i] - '0');
        in_number = true;
      } else if (in_number) {
        if (count < max) pids[count++] = pid;
        pid = 0;
        in_number = false;
      }
    }
  }
  if (in_number && count < max) pids[count++] = pid;
  ::close(fd);
  return count;
}

// Kills every child of this process (and each child's own group, when it has left ours) until
// none is left, for at most about 5 s (a process stuck in the kernel cannot be waited for). As
// the subreaper of the rank's descendants, the guard inherits each one whose parent died,
// including those that left the group (setsid), so this reaches all of them.
void KillChildren() {
  const pid_t group = ::getpgrp();
  for (int round = 0; round < 1000; ++round) {
    pid_t children[256];
    const size_t count = ReadChildren(children, 256);
    for (size_t i = 0; i < count; ++i) {
      ::kill(children[i], SIGKILL);
      const pid_t own_group = ::getpgid(children[i]);
      if (own_group > 0 && own_group != group) ::kill(-own_group, SIGKILL);
    }
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    if (::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD) return;
    const timespec pause = {0, 5 * 1000 * 1000};
    ::nanosleep(&pause, nullptr);
  }
}

// Kills everything the rank started, then this process with its group.
[[noreturn]] void KillGroup(pid_t rank) {
  ::kill(rank, SIGKILL);
  KillChildren();
  ::kill(-::getpgrp(), SIGKILL);  // this process is in the group too
  ::_exit(128 + SIGKILL);
}

// Ends this process as the rank ended: its exit code, or its signal (without a core file of the
// guard).
[[noreturn]] void EndAs(int raw_status) {
  if (WIFEXITED(raw_status)) ::_exit(WEXITSTATUS(raw_status));
  const int sig = WTERMSIG(raw_status);
  struct rlimit no_core = {0, 0};
  ::setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  ::sigaction(sig, &action, nullptr);
  sigset_t just_that;
  ::sigemptyset(&just_that);
  ::sigaddset(&just_that, sig);
  ::sigprocmask(SIG_UNBLOCK, &just_that, nullptr);
  ::kill(::getpid(), sig);
  ::_exit(128 + sig);
}

}  // namespace

void SplitIntoGuardAndRank(pid_t launcher) {
  sigset_t all, before;
  ::sigfillset(&all);
  ::sigprocmask(SIG_BLOCK, &all, &before);  // nothing lands between the fork and the guard's wait
  const pid_t rank = ::fork();
  if (rank <= 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // with the guard (or, without one, with dtrain)
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    if (rank < 0 && ::getppid() != launcher) ::_exit(128 + SIGKILL);
    return;
  }
  CloseAllDescriptors();
  ::prctl(PR_SET_NAME, "dtrain-guard");
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // The signal only wakes the wait below; what counts is whether dtrain is still the parent.
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (::getppid() != launcher) KillGroup(rank);  // dtrain died before the line above
  for (;;) {
    siginfo_t info;
    const int sig = ::sigwaitinfo(&all, &info);
    if (::getppid() != launcher) KillGroup(rank);
    if (sig != SIGCHLD) continue;  // dtrain signals the whole group: the rank has it already
    // Inherited descendants end here too; only the rank's end ends the guard, and what the
    // rank left running (in its group or not) ends with it.
    int raw = 0;
    pid_t ended;
    while ((ended = ::waitpid(-1, &raw, WNOHANG)) > 0) {
      if (ended != rank) continue;
      KillChildren();
      EndAs(raw);
    }
  }
}

}  // namespace dtrain
