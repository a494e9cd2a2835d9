// Hangs. Real torch.distributed (Gloo) ranks under the built dtrain, one of which stops
// entering collectives; the stall report must name it and its Python frame (py-spy), --on-stall
// stop must exit 124 and leave no process; a long silent compute step is not a stall; and
// `dtrain status` reads a running job from another process, never another job's ranks.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/dtrain_process.h"
#include "tests/support/hanging_torch.h"

namespace {

using ::testing::HasSubstr;
using namespace dtrain::testing;

// Silent, CPU-busy for 12 s, then done.
const char* kBusyScript = R"(import time
end = time.time() + 12
x = 0
while time.time() < end:
    x += 1
print("done", flush=True)
)";

TEST(Stall, PythonRankSleepingBeforeAllreduceIsNamedWithItsFrame) {
  if (!HaveTorch()) GTEST_SKIP() << "no torch in " << kVenvPython;
  TempDir dir;
  WriteFile(dir.path() + "/hang.py", HangingTorchScript(2));
  const double timeout_s = 6;
  DtrainProcess p({"launch", "-np", "3", "--log-dir", dir.path() + "/logs", "--job", "hang",
                   "--stall-timeout", "6", "--", kVenvPython, "hang.py"},
                  dir.path());
  // The report comes within the timeout + 5 s after the hang (step 2 is the last line).
  const std::string report = dir.path() + "/logs/hang/stall-1.txt";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return ::access(report.c_str(), R_OK) == 0; }, 120))
      << p.err();
  const std::string log0 = ReadFile(dir.path() + "/logs/hang/rank-0.log");
  const std::string text = ReadFile(report);
  EXPECT_THAT(log0, HasSubstr("step 2"));
  EXPECT_THAT(text, HasSubstr("the job waits for rank 2")) << text;
  EXPECT_THAT(text, HasSubstr("rank 2 in <module> (")) << text;
  EXPECT_THAT(text, HasSubstr("hang.py:8) `time.sleep(3600)`")) << text;
  EXPECT_THAT(text, HasSubstr("2 ranks (0,1) in all_reduce")) << text;
  // Still running after a report (--on-stall report); the job record has the event.
  EXPECT_NE(::kill(p.pid(), 0), -1);
  // The report is written first, then the job record names it.
  const std::string record = dir.path() + "/logs/hang/job.json";
  WaitFor([&] { return ReadFile(record).find("stall-1.txt") != std::string::npos; }, 10);
  EXPECT_THAT(ReadFile(record), HasSubstr("stall-1.txt"));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("report %0.1f s after launch (timeout %g s)\n", waited, timeout_s);
  p.Signal(SIGINT);
  EXPECT_EQ(p.Wait(60), 128 + SIGINT);
}

TEST(Stall, OnStallStopExits124AndLeavesNothing) {
  if (!HaveTorch()) GTEST_SKIP() << "no torch in " << kVenvPython;
  TempDir dir;
  WriteFile(dir.path() + "/hang.py", HangingTorchScript(2));
  DtrainProcess p(
      {"launch", "-np", "3", "--log-dir", dir.path() + "/logs", "--job", "stop", "--stall-timeout",
       "5", "--on-stall", "stop", "--grace-period", "3", "--", kVenvPython, "hang.py"},
      dir.path());
  EXPECT_EQ(p.Wait(180), 124) << p.err();
  const std::string err = p.err();
  std::string last = err.substr(0, err.find_last_not_of('\n') + 1);
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_THAT(last, HasSubstr("rank 2 on node")) << err;
  EXPECT_THAT(last, HasSubstr("stalled")) << err;
  EXPECT_TRUE(ProcessesWithEnv("DTRAIN_JOB=stop").empty());
  EXPECT_THAT(ReadFile(dir.path() + "/logs/stop/job.json"), HasSubstr("\"exit_code\": 124"));
}

TEST(Stall, LongSilentComputeIsNotAStall) {
  TempDir dir;
  WriteFile(dir.path() + "/busy.py", kBusyScript);
  DtrainRun run = RunDtrain({"launch", "-np", "1", "--log-dir", dir.path() + "/logs", "--job",
                             "busy", "--stall-timeout", "3", "--on-stall", "stop", "--",
                             "python3", "busy.py"},
                            dir.path(), {}, 120);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("stall:")));
  EXPECT_NE(::access((dir.path() + "/logs/busy/stall-1.txt").c_str(), F_OK), 0);
}

TEST(Stall, StatusShowsARunningJobAndAnEndedOne) {
  TempDir dir;
  WriteFile(dir.path() + "/slow.sh", "echo hello from $RANK; sleep 6; echo bye\n");
  DtrainProcess p({"launch", "-np", "4", "--log-dir", dir.path() + "/logs", "--job", "st",
                   "--", "sh", "slow.sh"},
                  dir.path());
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(dir.path() + "/logs/st/rank-3.log").find("hello") != std::string::npos; },
      30));
  DtrainRun live = RunDtrain({"status", "--log-dir", dir.path() + "/logs", "--json"}, dir.path());
  EXPECT_EQ(live.status, 0) << live.err;
  EXPECT_THAT(live.out, HasSubstr("\"status\": \"running\""));
  for (int r = 0; r < 4; ++r) EXPECT_THAT(live.out, HasSubstr("hello from " + std::to_string(r)));
  EXPECT_THAT(live.out, HasSubstr("\"state\": \"sleeping\""));
  EXPECT_THAT(live.out, ::testing::Not(HasSubstr("\"pid\": null")));
  EXPECT_EQ(p.Wait(60), 0) << p.err();
  DtrainRun ended = RunDtrain({"status", "--log-dir", dir.path() + "/logs", "--job", "st"},
                              dir.path());
  EXPECT_EQ(ended.status, 0);
  EXPECT_THAT(ended.out, HasSubstr("job st: succeeded, exit 0"));
  EXPECT_THAT(ended.out, HasSubstr("exit 0"));
  EXPECT_THAT(ended.out, HasSubstr("bye"));
}

// Two running jobs of one name, in two log folders: the probe tells them apart by the job's
// folder, so each status shows its own ranks' processes only.
TEST(Stall, StatusOfOneJobIgnoresAnotherOfTheSameName) {
  TempDir dir;
  std::vector<std::unique_ptr<DtrainProcess>> jobs;
  // b first: its ranks have the lower pids, the ones a probe that mixed the jobs would show.
  for (const char* which : {"b", "a"}) {
    jobs.push_back(std::make_unique<DtrainProcess>(
        std::vector<std::string>{"launch", "-np", "2", "--log-dir",
                                 dir.path() + "/logs-" + which, "--job", "same", "--", "sh",
                                 "-c", "echo up; exec sleep 30"},
        dir.path()));
    const std::string log = dir.path() + "/logs-" + which + "/same/rank-1.log";
    ASSERT_TRUE(WaitFor([&] { return ReadFile(log).find("up") != std::string::npos; }, 30));
  }
  DtrainRun a = RunDtrain({"status", "--log-dir", dir.path() + "/logs-a", "--job", "same",
                           "--json"},
                          dir.path());
  ASSERT_EQ(a.status, 0) << a.err;
  // Every pid it names runs with job a's folder.
  size_t named = 0;
  for (size_t at = 0; (at = a.out.find("\"pid\": ", at)) != std::string::npos; ++at) {
    const int pid = std::atoi(a.out.c_str() + at + 7);
    ASSERT_GT(pid, 0) << a.out;
    EXPECT_THAT(ReadFile("/proc/" + std::to_string(pid) + "/environ"),
                HasSubstr("DTRAIN_LOG_DIR=" + dir.path() + "/logs-a/same"))
        << "pid " << pid << " is not job a's\n" << a.out;
    ++named;
  }
  EXPECT_EQ(named, 2u) << a.out;
  for (auto& job : jobs) job->Signal(SIGINT);
  for (auto& job : jobs) EXPECT_EQ(job->Wait(60), 128 + SIGINT);
}

}  // namespace
