// torchrun's worker watchdog under dtrain (launcher/file_timer.h): real ranks arm deadlines with
// torch's own FileTimerClient through TORCHELASTIC_TIMER_FILE, as they do under torchrun with
// TORCHELASTIC_ENABLE_FILE_TIMER=1. A rank whose step hangs past its timer is killed within a
// second of the deadline, the report names the timer and the line the rank hung on, the job
// restarts under --max-restarts, and nothing is left behind (no process, no FIFO). torchrun runs
// the same script to show that it ends it too.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "launcher/file_timer.h"
#include "launcher/job_record.h"
#include "launcher/restart_policy.h"
#include "launcher/subprocess.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/hanging_torch.h"
#include "tests/support/shell_run.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using testing::DtrainProcess;
using testing::DtrainRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessesWithEnv;
using testing::ReadFile;
using testing::RunDtrain;
using testing::TempDir;
using testing::WaitFor;

// Steps under a watchdog timer; rank 1 hangs in step 1 of the attempts asked.
const std::string kTimedSteps = std::string(DTRAIN_SOURCE_DIR) + "/tests/torchrun/timed_steps.py";
const std::string kHungLine = kTimedSteps + ":29";

// The FIFOs of job `job` left in the temporary folder.
int FifosLeft(const std::string& job) {
  int left = 0;
  for (const auto& e : std::filesystem::directory_iterator("/tmp")) {
    if (e.path().filename().string().rfind("dtrain-timer." + job + ".", 0) == 0) ++left;
  }
  return left;
}

#define REQUIRE_TORCH() \
  if (!testing::HaveTorch()) GTEST_FAIL() << "no torch in " << testing::kVenvPython

TEST(FileTimer, AHungStepIsKilledAtItsDeadlineAndNamed) {
  REQUIRE_TORCH();
  TempDir dir;
  const std::string job = "ft-hung-" + std::to_string(::getpid());
  // Asked as torchrun is asked: in the launcher's own environment.
  DtrainRun run = RunDtrain({"launch", "-np", "2", "--log-dir", dir.path() + "/logs", "--job", job,
                             "--", testing::kVenvPython, kTimedSteps, "2", "1", "0.2"},
                            dir.path(), {"TORCHELASTIC_ENABLE_FILE_TIMER=1"}, 120);
  EXPECT_EQ(run.status, 128 + 9) << run.err;
  // torch's import (2-3 s), a 0.2 s step, the 2 s timer: far below the 600 s the step sleeps.
  EXPECT_LT(run.seconds, 40) << run.err;
  EXPECT_THAT(run.err, HasSubstr("rank 1 on node localhost failed: killed by SIGKILL"));
  EXPECT_THAT(run.err, HasSubstr("root cause: rank 1 on node localhost"));
  EXPECT_THAT(run.err, HasSubstr("TimerExpired: the watchdog timer 'train_step'"));
  EXPECT_THAT(run.err, HasSubstr("expired 2.0 s after it was set; killed with SIGKILL"));
  // The line the rank hung on, from its stack taken before it was killed.
  EXPECT_THAT(run.err, HasSubstr("at " + kHungLine + " "));
  const std::string log = ReadFile(dir.path() + "/logs/" + job + "/rank-1.log");
  EXPECT_THAT(log, HasSubstr("time.sleep(600)  # the hung step"));
  EXPECT_THAT(log, Not(HasSubstr("rank 1 done")));
  const std::string record = ReadFile(JobRecordPath(dir.path() + "/logs/" + job));
  EXPECT_THAT(record, HasSubstr("\"cause\": \"watchdog-timer\""));
  EXPECT_TRUE(ProcessesWithEnv("DTRAIN_JOB=" + job).empty());
  EXPECT_EQ(FifosLeft(job), 0);
}

TEST(FileTimer, TimersKeptLeaveTheJobAloneAndAGivenPathIsUsed) {
  REQUIRE_TORCH();
  TempDir dir;
  // Asked in the ranks' environment (-x), with the FIFO's path given.
  DtrainRun run = RunDtrain(
      {"launch", "-np", "2", "--log-dir", dir.path() + "/logs", "--job", "kept", "-x",
       "TORCHELASTIC_ENABLE_FILE_TIMER=1", "-x", "TORCHELASTIC_TIMER_FILE=" + dir.path() + "/wd",
       "--", testing::kVenvPython, kTimedSteps, "5", "0", "0.3"},
      dir.path(), {}, 120);
  EXPECT_EQ(run.status, 0) << run.err;
  for (int r = 0; r < 2; ++r) {
    const std::string log = ReadFile(dir.path() + "/logs/kept/rank-" + std::to_string(r) + ".log");
    EXPECT_THAT(log, HasSubstr("timer file " + dir.path() + "/wd.rank-" + std::to_string(r)));
    EXPECT_THAT(log, HasSubstr("rank " + std::to_string(r) + " done"));
    EXPECT_FALSE(std::filesystem::exists(dir.path() + "/wd.rank-" + std::to_string(r)));
  }
}

TEST(FileTimer, AKilledRankRestartsAndTheAttemptSaysWhy) {
  REQUIRE_TORCH();
  TempDir dir;
  DtrainRun run =
      RunDtrain({"launch", "-np", "2", "--max-restarts", "1", "--log-dir", dir.path() + "/logs",
                 "--job", "again", "--", testing::kVenvPython, kTimedSteps, "2", "1", "0.2"},
                dir.path(), {"TORCHELASTIC_ENABLE_FILE_TIMER=1"}, 120);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("cause: watchdog-timer"));
  EXPECT_THAT(run.err, HasSubstr("attempt 1 on localhost: watchdog-timer"));
  EXPECT_THAT(run.err, HasSubstr("its watchdog timer 'train_step' expired 2.0 s after it was set"));
  EXPECT_THAT(run.err, HasSubstr("attempt 2 on localhost: succeeded"));
}

// The stall watch and `dtrain status` see the rank, not the watchdog that runs it.
TEST(FileTimer, StatusShowsTheRankNotItsWatchdog) {
  REQUIRE_TORCH();
  TempDir dir;
  DtrainProcess p({"launch", "-np", "2", "--log-dir", dir.path() + "/logs", "--job", "seen", "--",
                   testing::kVenvPython, kTimedSteps, "60", "0", "1.5"},
                  dir.path(), {"TORCHELASTIC_ENABLE_FILE_TIMER=1"});
  ASSERT_TRUE(WaitFor(
      [&] {
        return ReadFile(dir.path() + "/logs/seen/rank-1.log").find("timer file") !=
               std::string::npos;
      },
      60));
  DtrainRun live = RunDtrain({"status", "--log-dir", dir.path() + "/logs", "--json"}, dir.path());
  EXPECT_EQ(live.status, 0) << live.err;
  const nlohmann::json status = nlohmann::json::parse(live.out);
  ASSERT_EQ(status["ranks"].size(), 2u) << live.out;
  for (const nlohmann::json& rank : status["ranks"]) {
    ASSERT_TRUE(rank["pid"].is_number_integer()) << live.out;
    const std::string cmd =
        ReadFile("/proc/" + std::to_string(rank["pid"].get<int>()) + "/cmdline");
    EXPECT_THAT(cmd, HasSubstr(kTimedSteps)) << "rank " << rank["rank"];
    EXPECT_THAT(cmd, Not(HasSubstr("dtrain-file-timer-server"))) << "rank " << rank["rank"];
  }
  EXPECT_EQ(p.Wait(120), 0) << p.err();
}

// torchrun, asked the same way, ends the same hung rank: the behaviour dtrain stands in for.
TEST(FileTimer, TorchrunEndsTheSameHungRank) {
  REQUIRE_TORCH();
  const std::string torchrun = std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/torchrun";
  ASSERT_EQ(::access(torchrun.c_str(), X_OK), 0) << torchrun;
  TempDir dir;
  const testing::ShellRun run =
      testing::RunShell("cd " + dir.path() + " && TORCHELASTIC_ENABLE_FILE_TIMER=1 timeout 120 " +
                        torchrun + " --standalone --nproc-per-node 2 " + kTimedSteps + " 2 1 0.2");
  EXPECT_FALSE(run.status.ok()) << run.out;
  EXPECT_NE(run.status.code, 124) << "torchrun did not end the hung rank\n" << run.out;
  EXPECT_THAT(run.out, HasSubstr("rank 0 done"));
  EXPECT_THAT(run.out, Not(HasSubstr("rank 1 done")));
}

// A signal that ends the rank, sent to its watchdog alone (as a Slurm step's task gets it), takes
// the FIFO away at once, before the rank has ended (here it ignores SIGTERM), as torchrun's
// agent stops its timer server before its workers: the SIGKILL that soon follows (a step's
// KillWait, the grace period) leaves no FIFO behind.
TEST(FileTimer, TheFifoGoesWhenTheWatchdogIsToldToEndTheRank) {
  TempDir dir;
  ClusterSpec spec;
  FileTimer timer;
  timer.on = true;
  timer.path = dir.path() + "/wd";
  SubprocessOptions options;
  // The rank says when its trap is set: a SIGTERM before would end it.
  const std::string ready = dir.path() + "/trap-set";
  options.argv =
      UnderFileTimer({"sh", "-c", "trap '' TERM; : > " + ready + "; sleep 30"}, spec, timer);
  options.env["RANK"] = "0";
  Subprocess watchdog;
  ASSERT_EQ(watchdog.Start(options), "");
  const std::string fifo = timer.path + ".rank-0";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(fifo); }, 10)) << "no FIFO made";
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(ready); }, 10)) << "no rank";
  watchdog.Signal(SIGTERM);
  EXPECT_TRUE(WaitFor([&] { return !std::filesystem::exists(fifo); }, 2)) << fifo << " left";
  EXPECT_FALSE(watchdog.Done()) << "the rank ignores SIGTERM: it still runs";
  watchdog.SignalGroup(SIGKILL);
  watchdog.Finish();
  EXPECT_FALSE(std::filesystem::exists(fifo));
}

TEST(FileTimer, VerdictNamesTheTimer) {
  AttemptVerdict verdict;
  verdict.cause = "signal";
  verdict.detail = "rank 1 on node a: killed by SIGKILL";
  MarkWatchdogTimer(verdict,
                    "TimerExpired: the watchdog timer 'step' (torch.distributed.elastic.timer) of "
                    "pid 7 expired 60.0 s after it was set; killed with SIGKILL\n");
  EXPECT_EQ(verdict.cause, "watchdog-timer");
  EXPECT_EQ(verdict.detail,
            "rank 1 on node a: killed by SIGKILL; its watchdog timer 'step' expired 60.0 s after "
            "it was set");
  AttemptVerdict oom;
  oom.cause = "oom";
  MarkWatchdogTimer(oom, "TimerExpired: the watchdog timer 'step'");
  EXPECT_EQ(oom.cause, "oom");
  AttemptVerdict plain;
  plain.cause = "error";
  MarkWatchdogTimer(plain, "ValueError: the watchdog timer is wrong");
  EXPECT_EQ(plain.cause, "error");
}

}  // namespace
}  // namespace dtrain
