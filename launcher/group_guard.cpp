#include "launcher/group_guard.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dtrain {
namespace {

// The guard holds no descriptor: not the rank's output pipe (dtrain must see it end with the
// rank) and not Boost's exec-error pipe (Boost waits for it to close to know the exec worked).
void CloseAllDescriptors() {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 0U, ~0U, 0U) == 0) return;
#endif
  struct rlimit limit;
  rlim_t top = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
  if (top > (1 << 16)) top = 1 << 16;
  for (rlim_t fd = 0; fd < top; ++fd) ::close(static_cast<int>(fd));
}

[[noreturn]] void KillGroup() {
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
  // The signal only wakes the wait below; what counts is whether dtrain is still the parent.
  ::prctl(PR_SET_PDEATHSIG, SIGHUP);
  if (::getppid() != launcher) KillGroup();  // dtrain died before the line above
  for (;;) {
    siginfo_t info;
    const int sig = ::sigwaitinfo(&all, &info);
    if (::getppid() != launcher) KillGroup();
    if (sig != SIGCHLD) continue;  // dtrain signals the whole group: the rank has it already
    int raw = 0;
    if (::waitpid(rank, &raw, WNOHANG) == rank) EndAs(raw);
  }
}

}  // namespace dtrain
