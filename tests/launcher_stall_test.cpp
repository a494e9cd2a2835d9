// Hangs. Real torch.distributed (Gloo) ranks under the built dtrain, one of which stops
// entering collectives; the stall report must name it and its Python frame (py-spy), --on-stall
// stop must exit 124 and leave no process; a long silent compute step is not a stall; and
// `dtrain status` reads a running job from another process.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/launcher_subprocess.h"

namespace {

using ::testing::HasSubstr;
using namespace dtrain::testing;

const std::string kPython = std::string(DTRAIN_SOURCE_DIR) + "/.venv/bin/python3";

// Rank 2 sleeps before its fourth all_reduce; the others wait in it.
const char* kHangingScript = R"(import os, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=__import__("datetime").timedelta(seconds=600))
rank = dist.get_rank()
t = torch.ones(4)
for step in range(100):
    if rank == 2 and step == 3:
        time.sleep(3600)
    dist.all_reduce(t)
    print(f"step {step}", flush=True)
)";

// Silent, CPU-busy for 12 s, then done.
const char* kBusyScript = R"(import time
end = time.time() + 12
x = 0
while time.time() < end:
    x += 1
print("done", flush=True)
)";

bool HavePython() {
  return ::access(kPython.c_str(), X_OK) == 0 &&
         std::system((kPython + " -c 'import torch' 2>/dev/null").c_str()) == 0;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(Stall, PythonRankSleepingBeforeAllreduceIsNamedWithItsFrame) {
  if (!HavePython()) GTEST_SKIP() << "no torch in " << kPython;
  TempDir dir;
  WriteFile(dir.path() + "/hang.py", kHangingScript);
  const double timeout_s = 6;
  DtrainProcess p({"launch", "-np", "3", "--log-dir", dir.path() + "/logs", "--job", "hang",
                   "--stall-timeout", "6", "--", kPython, "hang.py"},
                  dir.path());
  // The report comes within the timeout + 5 s after the hang (step 2 is the last line).
  const std::string report = dir.path() + "/logs/hang/stall-1.txt";
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return ::access(report.c_str(), R_OK) == 0; }, 120))
      << p.err();
  const std::string log0 = Slurp(dir.path() + "/logs/hang/rank-0.log");
  const std::string text = Slurp(report);
  EXPECT_THAT(log0, HasSubstr("step 2"));
  EXPECT_THAT(text, HasSubstr("the job waits for rank 2")) << text;
  EXPECT_THAT(text, HasSubstr("rank 2 in <module> (")) << text;
  EXPECT_THAT(text, HasSubstr("hang.py:8) `time.sleep(3600)`")) << text;
  EXPECT_THAT(text, HasSubstr("2 ranks (0,1) in all_reduce")) << text;
  // Still running after a report (--on-stall report); the job record has the event.
  EXPECT_NE(::kill(p.pid(), 0), -1);
  // The event reaches job.json just after stall-1.txt is written.
  const std::string record = dir.path() + "/logs/hang/job.json";
  EXPECT_TRUE(WaitFor([&] { return Slurp(record).find("stall-1.txt") != std::string::npos; }, 10))
      << Slurp(record);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("report %0.1f s after launch (timeout %g s)\n", waited, timeout_s);
  p.Signal(SIGINT);
  EXPECT_EQ(p.Wait(60), 128 + SIGINT);
}

TEST(Stall, OnStallStopExits124AndLeavesNothing) {
  if (!HavePython()) GTEST_SKIP() << "no torch in " << kPython;
  TempDir dir;
  WriteFile(dir.path() + "/hang.py", kHangingScript);
  DtrainProcess p({"launch", "-np", "3", "--log-dir", dir.path() + "/logs", "--job", "stop",
                   "--stall-timeout", "5", "--on-stall", "stop", "--grace-period", "3", "--",
                   kPython, "hang.py"},
                  dir.path());
  EXPECT_EQ(p.Wait(180), 124) << p.err();
  const std::string err = p.err();
  std::string last = err.substr(0, err.find_last_not_of('\n') + 1);
  last = last.substr(last.rfind('\n') + 1);
  EXPECT_THAT(last, HasSubstr("rank 2 on node")) << err;
  EXPECT_THAT(last, HasSubstr("stalled")) << err;
  EXPECT_TRUE(ProcessesWithEnv("DTRAIN_JOB=stop").empty());
  EXPECT_THAT(Slurp(dir.path() + "/logs/stop/job.json"), HasSubstr("\"exit_code\": 124"));
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
      [&] { return Slurp(dir.path() + "/logs/st/rank-3.log").find("hello") != std::string::npos; },
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

}  // namespace
