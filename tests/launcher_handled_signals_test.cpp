// torchrun's --signals-to-handle (launcher/handled_signals.h): the list as read, and on real
// local ranks: SIGQUIT (torchrun's default list) stops the job gracefully, each rank getting
// SIGTERM; an added SIGUSR2 reaches each rank as itself; a bad name is refused before anything
// starts. (SIGUSR1 beside torchrun: TorchrunParity.SignalsToHandleHandsTheSignalToEveryRank.)
#include <signal.h>

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/error.h"
#include "launcher/handled_signals.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using testing::DtrainProcess;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::TempDir;
using testing::WaitFor;

const std::string kScript = std::string(DTRAIN_SOURCE_DIR) + "/tests/torchrun/closing_signal.py";

TEST(HandledSignals, ListsAreReadAsTorchrunWritesThem) {
  EXPECT_THAT(ParseHandledSignals(kDefaultHandledSignals),
              ElementsAre(SIGTERM, SIGINT, SIGHUP, SIGQUIT));
  EXPECT_THAT(ParseHandledSignals("SIGUSR1, SIGUSR1,SIGTERM,"), ElementsAre(SIGUSR1, SIGTERM));
  try {
    ParseHandledSignals("SIGTERM,SIGKILL");
    ADD_FAILURE() << "SIGKILL cannot be handled";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_THAT(e.what(), HasSubstr("'SIGKILL' is not a signal dtrain can stop a job on"));
    EXPECT_THAT(e.what(), HasSubstr("SIGUSR1, SIGUSR2"));
  }
  EXPECT_EQ(ClosingSignal(SIGQUIT), SIGTERM);
  EXPECT_EQ(ClosingSignal(SIGINT), SIGTERM);
  EXPECT_EQ(ClosingSignal(SIGUSR2), SIGUSR2);
}

// Each rank's log once both said "ready".
bool BothReady(const std::string& job_dir) {
  for (int r = 0; r < 2; ++r) {
    if (ReadFile(job_dir + "/rank-" + std::to_string(r) + ".log").find("ready") ==
        std::string::npos)
      return false;
  }
  return true;
}

// Two local ranks of `args` (after -np 2 --log-dir DIR/logs --job JOB) that dtrain gets `sig`
// for once both said "ready": dtrain's exit status (-1: never ready, or it did not end).
int SignalledJob(const std::string& dir, const std::string& job, std::vector<std::string> args,
                 int sig) {
  std::vector<std::string> argv = {"launch",    "-q",          "-np",   "2",
                                   "--log-dir", dir + "/logs", "--job", job};
  argv.insert(argv.end(), args.begin(), args.end());
  DtrainProcess p(argv, dir);
  if (!WaitFor([&] { return BothReady(dir + "/logs/" + job); }, 30)) return -1;
  p.Signal(sig);
  return p.Wait(30);
}

TEST(HandledSignals, SigquitStopsTheJobWithSigtermToEveryRank) {
  TempDir dir;
  EXPECT_EQ(SignalledJob(dir.path(), "quit", {"--", "python3", kScript}, SIGQUIT), 128 + SIGQUIT);
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(ReadFile(dir.path() + "/logs/quit/rank-" + std::to_string(r) + ".log"),
                HasSubstr("got SIGTERM"));
  }
}

TEST(HandledSignals, AnAddedSignalReachesEveryRankAsItself) {
  TempDir dir;
  const std::string script =
      "import os, signal, sys, time\n"
      "signal.signal(signal.SIGUSR2, lambda n, f: (print('got SIGUSR2', "
      "os.environ['TORCHELASTIC_SIGNALS_TO_HANDLE'], flush=True), sys.exit(0)))\n"
      "print('ready', flush=True)\n"
      "time.sleep(120)\n";
  EXPECT_EQ(SignalledJob(dir.path(), "usr2",
                         {"--signals-to-handle", "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2", "--",
                          "python3", "-c", script},
                         SIGUSR2),
            128 + SIGUSR2);
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(ReadFile(dir.path() + "/logs/usr2/rank-" + std::to_string(r) + ".log"),
                HasSubstr("got SIGUSR2 SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR2"));
  }
}

TEST(HandledSignals, ABadNameStartsNothing) {
  TempDir dir;
  testing::DtrainRun run =
      testing::RunDtrain({"launch", "-np", "1", "--log-dir", dir.path() + "/logs", "--job", "bad",
                          "--signals-to-handle", "SIGTERM,SIGSTOP", "--", "true"},
                         dir.path());
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--signals-to-handle: 'SIGSTOP' is not a signal"));
}

}  // namespace
}  // namespace dtrain
