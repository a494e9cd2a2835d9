// The subreaper's sweep at the end of a launch (launcher/local/rank_orphans.h) reads every
// process's /proc/PID/stat. A process that is reaped between the file's opening and its reading
// makes the read fail (ESRCH); the sweep must take that as a process gone, not end dtrain.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "launcher/local/rank_orphans.h"

namespace dtrain {
namespace {

// Starts, outside this process's descendants, a shell that starts and reaps short-lived processes
// for as long as this process lives; returns its pid. It holds none of this process's output, so
// that a test run that fails early does not keep its reader waiting.
pid_t StartChurn() {
  int out[2];
  if (::pipe(out) != 0) return -1;
  const std::string loop =
      "while kill -0 " + std::to_string(::getpid()) + " 2>/dev/null; do /bin/true; done";
  const pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    const pid_t churn = ::fork();
    if (churn == 0) {
      const int null = ::open("/dev/null", O_RDWR);
      for (int fd : {0, 1, 2}) ::dup2(null, fd);
      ::close(out[0]);
      ::close(out[1]);
      ::execl("/bin/sh", "sh", "-c", loop.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    (void)!::write(out[1], &churn, sizeof churn);
    ::_exit(0);
  }
  ::close(out[1]);
  pid_t churn = -1;
  if (::read(out[0], &churn, sizeof churn) != sizeof churn) churn = -1;
  ::close(out[0]);
  ::waitpid(child, nullptr, 0);
  return churn;
}

TEST(RankOrphans, ProcessesEndingWhileTheSweepReadsThemAreSkipped) {
  const pid_t churn = StartChurn();
  ASSERT_GT(churn, 0);
  // The sweep does nothing unless this process is a subreaper; the churn is not its descendant
  // (its parent ended before), so the sweep leaves it alone and only reads its children's files.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const pid_t sleeper = ::fork();
  if (sleeper == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int null = ::open("/dev/null", O_RDWR);
    for (int fd : {0, 1, 2}) ::dup2(null, fd);
    ::pause();
    ::_exit(0);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int sweeps = 0;
  // A read that fails throws out of the sweep without the change (gtest reports the exception).
  struct EndChurn {
    pid_t pid;
    ~EndChurn() { ::kill(pid, SIGKILL); }
  } end_churn{churn};
  while (std::chrono::steady_clock::now() < until) {
    KillAdoptedChildren();
    ++sweeps;
  }
  EXPECT_GT(sweeps, 0);
  // The child the first sweep found was killed and reaped.
  EXPECT_EQ(::kill(sleeper, 0), -1);
}

}  // namespace
}  // namespace dtrain
