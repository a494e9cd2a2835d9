// Local ranks in cgroups of their own (launcher/local/rank_cgroup.h), with the built dtrain
// binary: a rank's daemon that left its session and replaced its environment is gone before a
// restart, DTRAIN_RANK_CGROUP=0 keeps a rank in dtrain's cgroup, and the empty cgroups of a dtrain
// killed outright are removed by the next. Where this machine has no cgroup v2, or this process may
// not make a cgroup, the tests that need one are skipped.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/dtrain_process.h"

namespace dtrain {
namespace {

using testing::DtrainRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::RunDtrain;
using testing::TempDir;

std::string JobDir(const TempDir& dir, const std::string& job) {
  return dir.path() + "/dtrain-logs/" + job;
}

// This process's cgroup v2 folder (the first cgroup2 mount and the "0::" line of
// /proc/self/cgroup), where dtrain, started from here, makes its ranks' cgroups; "" without one.
std::string OwnCgroupDir() {
  std::istringstream mounts(ReadFile("/proc/self/mounts"));
  std::string device, where, type, rest, mount;
  while (mount.empty() && mounts >> device >> where >> type && std::getline(mounts, rest)) {
    if (type == "cgroup2") mount = where;
  }
  const std::string cgroup = ReadFile("/proc/self/cgroup");
  const size_t at = cgroup.find("0::");
  if (mount.empty() || at == std::string::npos) return "";
  std::string own = cgroup.substr(at + 3, cgroup.find('\n', at) - at - 3);
  if (!own.empty() && own.back() == '/') own.pop_back();
  return mount + own;
}

// Where this machine gives each rank a cgroup (cgroup v2, dtrain allowed to make one: as root
// here), that child is gone before the restart, not only when dtrain exits: the attempt after
// the one whose rank 0 was SIGKILLed (its guard with it) looks for it and must not find it alive.
TEST(LocalLaunch, SetsidChildWithAnEnvironmentOfItsOwnIsGoneBeforeTheRestart) {
  TempDir dir;
  const std::string pidfile = dir.path() + "/daemon.pid";
  const std::string script =
      "if [ $DTRAIN_RESTART_COUNT = 0 ]; then"
      "  if [ $RANK = 0 ]; then trap '' TERM; setsid env -i sleep 1000 & echo $! > " +
      pidfile +
      "; while :; do sleep 0.1; done; fi;"
      "  while [ ! -s " +
      pidfile +
      " ]; do sleep 0.05; done; sleep 0.2; exit 3;"
      "elif [ $RANK = 0 ]; then p=$(cat " +
      pidfile +
      ");"
      "  if [ -r /proc/$p/stat ] && [ \"$(cut -d' ' -f3 /proc/$p/stat)\" != Z ];"
      "  then echo daemon alive; else echo daemon gone; fi; fi";
  const DtrainRun run =
      RunDtrain({"launch", "--nproc-per-node", "2", "--job", "cg", "--quiet", "--max-restarts", "1",
                 "--grace-period", "1", "--", "sh", "-c", script},
                dir.path());
  const int pid = std::atoi(ReadFile(pidfile).c_str());
  if (pid > 1) ::kill(pid, SIGKILL);
  EXPECT_EQ(run.status, 0) << run.err;
  if (OwnCgroupDir().empty()) GTEST_SKIP() << "no cgroup v2 on this machine";
  EXPECT_THAT(ReadFile(JobDir(dir, "cg") + "/rank-0.log"), HasSubstr("daemon gone")) << run.err;
}

// Each local rank is in a cgroup of its own, below dtrain's (where this machine allows it);
// DTRAIN_RANK_CGROUP=0 in the rank's environment keeps it in dtrain's.
TEST(LocalLaunch, ARankRunsInACgroupOfItsOwnUnlessItsEnvironmentSaysNo) {
  TempDir dir;
  const std::vector<std::string> args = {"launch", "--job", "own",  "--quiet",
                                         "--",     "grep",  "^0::", "/proc/self/cgroup"};
  const DtrainRun own = RunDtrain(args, dir.path());
  EXPECT_EQ(own.status, 0) << own.err;
  if (OwnCgroupDir().empty()) GTEST_SKIP() << "no cgroup v2 on this machine";
  EXPECT_THAT(ReadFile(JobDir(dir, "own") + "/rank-0.log"), HasSubstr("/dtrain-rank-"));
  std::vector<std::string> off = args;
  off[2] = "off";
  const DtrainRun shared = RunDtrain(off, dir.path(), {"DTRAIN_RANK_CGROUP=0"});
  EXPECT_EQ(shared.status, 0) << shared.err;
  const std::string line = ReadFile(JobDir(dir, "off") + "/rank-0.log");
  EXPECT_THAT(line, HasSubstr("0::/"));
  EXPECT_THAT(line, Not(HasSubstr("dtrain-rank-")));
}

// A dtrain killed outright never removes its ranks' cgroups; the next launch removes the empty
// ones whose dtrain is gone, and leaves those of a dtrain still running.
TEST(LocalLaunch, EmptyCgroupsOfADtrainKilledOutrightAreRemovedByTheNext) {
  const std::string parent = OwnCgroupDir();
  if (parent.empty()) GTEST_SKIP() << "no cgroup v2 on this machine";
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const std::string stale = parent + "/dtrain-rank-" + std::to_string(gone) + "-1";
  const std::string live = parent + "/dtrain-rank-" + std::to_string(::getpid()) + "-1";
  if (::mkdir(stale.c_str(), 0755) != 0 || ::mkdir(live.c_str(), 0755) != 0)
    GTEST_SKIP() << "this process may not make a cgroup in " << parent;
  TempDir dir;
  const DtrainRun run =
      RunDtrain({"launch", "--job", "sweep", "--quiet", "--", "true"}, dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(::access(stale.c_str(), F_OK), 0) << stale << " was left";
  EXPECT_EQ(::access(live.c_str(), F_OK), 0) << live << " was removed";
  ::rmdir(stale.c_str());
  ::rmdir(live.c_str());
}

}  // namespace
}  // namespace dtrain
