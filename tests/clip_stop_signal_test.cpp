// dtrain-clip on SIGTERM, SIGINT and SIGUSR1 (runtime/train/stop_signals.h, stop_agreement.h):
// real dtrain-clip processes, signalled with kill(2). A rank that gets the signal and the ranks
// that do not stop after the same step (a step or two later), write epoch_latest.pt there and end
// by the signal; a rank whose peer cannot step any more (SIGSTOPped, as a rank behind a cut link)
// ends by the signal within its window, without a checkpoint, instead of waiting for the
// collective's timeout; a signal that comes while a checkpoint is written to a slow disk waits for
// the write; with --save-on-signal off the signal ends the process at once, as it did before.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dist_ranks.h"
#include "tests/support/metrics_lines.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/slow_disk.h"
#include "tests/support/test_paths.h"
#include "tests/support/wait_for.h"

namespace dtrain::clip {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
const std::string kClip = std::string(DTRAIN_BINARY_DIR) + "/dtrain-clip";

// fmnist-tiny on synthetic data: one long epoch (4,000 steps of 16 per rank on 1 rank), epoch
// checkpoints only (none mid-epoch unless a signal asks for one).
std::vector<std::string> Train(const std::vector<std::string>& extra) {
  std::istringstream words(
      "train --model fmnist-tiny --dataset-type synthetic --batch-size 16 --train-num-samples "
      "64000 --epochs 1 --zeroshot-frequency 0 --save-frequency 1 --threads 1 --seed 0");
  std::vector<std::string> args{std::istream_iterator<std::string>(words), {}};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The highest "step" of rank `rank`'s metrics under `log_dir` (0 before the first).
long LastStep(const std::string& log_dir, int rank) {
  std::ifstream in(log_dir + "/metrics/rank-" + std::to_string(rank) + ".jsonl");
  long last = 0;
  for (std::string line; std::getline(in, line);) {
    const std::string step = dtrain::test::Field(line, "step");
    if (!step.empty() && line.find("\"event\"") == std::string::npos) last = std::stol(step);
  }
  return last;
}

// Waits until every rank in `ranks` has logged `step` (false after 60 s).
bool WaitForStep(const std::string& log_dirs, const std::vector<int>& ranks, long step) {
  return dtrain::testing::WaitFor(
      [&] {
        for (int r : ranks) {
          std::string dir = log_dirs;
          if (const size_t at = dir.find("{rank}"); at != std::string::npos) {
            dir.replace(at, 6, std::to_string(r));
          }
          if (LastStep(dir, r) < step) return false;
        }
        return true;
      },
      60);
}

// Two ranks of Train({}), a node each with DTRAIN_LOG_DIR `dir`/nodeR; true once both logged
// step 5.
bool StartTwoRanksPastStepFive(const std::string& dir, testing::RankProcesses& ranks) {
  ranks.Start(kClip, Train({}), 2, 1, {0, 1}, dir, {{"DTRAIN_LOG_DIR", dir + "/node{rank}"}});
  return WaitForStep(dir + "/node{rank}", {0, 1}, 5);
}

// One process of Train(`extra`) logging into `dir`, sent SIGTERM once it logged step 5: its log,
// once it ended (by SIGTERM, or the test fails).
std::string SigtermedAtStepFive(const std::string& dir, const std::vector<std::string>& extra) {
  testing::RankProcesses run;
  run.Start(kClip, Train(extra), 1, 1, {0}, dir, {{"DTRAIN_LOG_DIR", dir}});
  EXPECT_TRUE(WaitForStep(dir, {0}, 5)) << run.Log(0);
  kill(run.pids[0], SIGTERM);
  EXPECT_EQ(run.Wait(std::chrono::seconds(60)), std::vector<int>({-SIGTERM})) << run.Log(0);
  return run.Log(0);
}

// How a stop says its step's checkpoint was written by --save-every-n-steps.
const std::string kAlreadyWritten =
    " (this step's checkpoint, already written by --save-every-n-steps); --resume latest continues "
    "from there";

std::string Scratch(const char* name) {
  return dtrain::testing::ScratchDirs::Make(name);
}

// Rank 1 alone gets SIGTERM: both ranks stop after the same step, each node (a folder per rank, as
// on nodes without shared storage) holds epoch_latest.pt of that step, both end by SIGTERM, and a
// resume on both starts right after it.
TEST(StopOnSignal, OneRanksSigtermStopsEveryRankAfterTheSameStepWithItsCheckpoint) {
  const std::string dir = Scratch("dtrain-stop-two");
  testing::RankProcesses ranks;
  ASSERT_TRUE(StartTwoRanksPastStepFive(dir, ranks)) << ranks.Log(0) << ranks.Log(1);
  kill(ranks.pids[1], SIGTERM);
  const std::vector<int> codes = ranks.Wait(std::chrono::seconds(60));
  EXPECT_EQ(codes, std::vector<int>({-SIGTERM, -SIGTERM})) << ranks.Log(0) << ranks.Log(1);
  const long stopped = LastStep(dir + "/node0", 0);
  EXPECT_GE(stopped, 5);
  EXPECT_EQ(LastStep(dir + "/node1", 1), stopped);
  const std::string said = "stopped by SIGTERM after step " + std::to_string(stopped) +
                           ", the step every rank stopped at";
  for (int r = 0; r < 2; ++r) {
    const std::string node = dir + "/node" + std::to_string(r);
    EXPECT_NE(ranks.Log(r).find(said + ": " + node + "/checkpoints/epoch_latest.pt written in "),
              std::string::npos)
        << ranks.Log(r);
    const std::string end =
        dtrain::test::EndLines(node + "/metrics")["rank-" + std::to_string(r) + ".jsonl"];
    EXPECT_EQ(dtrain::test::Field(end, "stopped_by"), "\"SIGTERM\"") << end;
  }
  EXPECT_NE(ranks.Log(1).find("dtrain-clip: SIGTERM: stopping"), std::string::npos);

  testing::RankProcesses resumed;
  resumed.Start(kClip, Train({"--resume", "latest", "--max-steps", std::to_string(stopped + 3)}), 2,
                1, {0, 1}, Scratch("dtrain-stop-two-resumed"),
                {{"DTRAIN_LOG_DIR", dir + "/node{rank}"}});
  EXPECT_EQ(resumed.Wait(std::chrono::seconds(60)), std::vector<int>({0, 0}))
      << resumed.Log(0) << resumed.Log(1);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(resumed.Log(r).find("epoch 0, step " + std::to_string(stopped) + "\n"),
              std::string::npos)
        << resumed.Log(r);
  }
}

// Rank 0 cannot step (SIGSTOP: as if its node's link were cut); rank 1 gets SIGTERM. No step can
// end, so rank 1 ends by SIGTERM once its window is over (half a second and twice a step), with no
// checkpoint, instead of waiting in the collective until its timeout (minutes).
TEST(StopOnSignal, RankWhosePeerCannotStepEndsAfterItsWindowWithoutACheckpoint) {
  const std::string dir = Scratch("dtrain-stop-stuck");
  testing::RankProcesses ranks;
  ASSERT_TRUE(StartTwoRanksPastStepFive(dir, ranks)) << ranks.Log(0) << ranks.Log(1);
  kill(ranks.pids[0], SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto signalled = Clock::now();
  kill(ranks.pids[1], SIGTERM);
  int status = 0;
  // Rank 1 alone: rank 0 stays stopped until it is killed below.
  dtrain::testing::WaitFor(
      [&] { return waitpid(ranks.pids[1], &status, WNOHANG) == ranks.pids[1]; }, 30);
  const double seconds = std::chrono::duration<double>(Clock::now() - signalled).count();
  kill(ranks.pids[0], SIGKILL);
  kill(ranks.pids[1], SIGKILL);  // should it still run
  ranks.pids.erase(ranks.pids.begin() + 1);
  ranks.Wait(std::chrono::seconds(10));
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status << ranks.Log(1);
  EXPECT_LT(seconds, 5.0) << ranks.Log(1);
  EXPECT_NE(ranks.Log(1).find("dtrain-clip: SIGTERM: no step ended within "), std::string::npos)
      << ranks.Log(1);
  EXPECT_FALSE(fs::exists(dir + "/node1/checkpoints/epoch_latest.pt"));
}

// One process: SIGUSR1 (Slurm's warning before a preemption) stops it after the step it came in,
// with epoch_latest.pt of that step; the resumed run finishes the epoch, whose end moves
// epoch_latest.pt on (else --resume latest would go back to the stop's step).
TEST(StopOnSignal, SigusrOneSavesTheStepAndTheEpochsEndMovesTheLatestOn) {
  const std::string dir = Scratch("dtrain-stop-one");
  const std::vector<std::string> small = {"--train-num-samples", "1600"};  // 100 steps
  testing::RankProcesses run;
  run.Start(kClip, Train(small), 1, 1, {0}, dir, {{"DTRAIN_LOG_DIR", dir}});
  ASSERT_TRUE(WaitForStep(dir, {0}, 5)) << run.Log(0);
  kill(run.pids[0], SIGUSR1);
  EXPECT_EQ(run.Wait(std::chrono::seconds(60)), std::vector<int>({-SIGUSR1})) << run.Log(0);
  const long stopped = LastStep(dir, 0);
  ASSERT_LT(stopped, 100) << run.Log(0);
  EXPECT_NE(run.Log(0).find("stopped by SIGUSR1 after step " + std::to_string(stopped) + ": " +
                            dir + "/checkpoints/epoch_latest.pt written in "),
            std::string::npos)
      << run.Log(0);

  std::vector<std::string> resume = small;
  resume.insert(resume.end(), {"--resume", "latest"});
  testing::RankProcesses rest;
  rest.Start(kClip, Train(resume), 1, 1, {0}, Scratch("dtrain-stop-one-rest"),
             {{"DTRAIN_LOG_DIR", dir}});
  EXPECT_EQ(rest.Wait(std::chrono::seconds(60)), std::vector<int>({0})) << rest.Log(0);
  EXPECT_NE(rest.Log(0).find("epoch 0, step " + std::to_string(stopped) + "\n"), std::string::npos)
      << rest.Log(0);
  testing::RankProcesses again;
  again.Start(kClip, Train(resume), 1, 1, {0}, Scratch("dtrain-stop-one-again"),
              {{"DTRAIN_LOG_DIR", dir}});
  EXPECT_EQ(again.Wait(std::chrono::seconds(60)), std::vector<int>({0})) << again.Log(0);
  EXPECT_NE(again.Log(0).find("resumed from " + dir +
                              "/checkpoints/epoch_latest.pt: epoch 1, "
                              "step 100\n"),
            std::string::npos)
      << again.Log(0);
}

// With a step checkpoint every step, the stop's step already has one: it is not written again
// (ViT-B/32's is 1.7 GiB, in the launcher's grace period).
TEST(StopOnSignal, AStepCheckpointOfTheStopsStepIsNotWrittenAgain) {
  const std::string dir = Scratch("dtrain-stop-step-saved");
  const std::string log = SigtermedAtStepFive(dir, {"--save-every-n-steps", "1"});
  EXPECT_NE(log.find("stopped by SIGTERM after step " + std::to_string(LastStep(dir, 0)) + ": " +
                     dir + "/checkpoints/epoch_latest.pt" + kAlreadyWritten),
            std::string::npos)
      << log;
}

// Checkpoints on a slow disk (4 MB/s: fmnist-tiny's 15 MB take about 4 s, far longer than the
// window of half a second and two steps). A SIGTERM that comes while step 6's checkpoint is
// written waits for the write, and the run stops after step 6, whose checkpoint that is. Were the
// window not held during the write, it would end the process mid-write ("no step ended within"),
// and the restart would go back to the start. Needs root (tests/support/slow_disk.h); skipped
// otherwise.
TEST(StopOnSignal, SignalDuringAStepCheckpointOnASlowDiskWaitsForTheWrite) {
  const std::string dir = Scratch("dtrain-stop-slow-disk");
  dtrain::testing::SlowDisk disk(dir, "dtrain-stop-slow-disk-" + std::to_string(getpid()), 4 << 20);
  if (!disk.error().empty()) GTEST_SKIP() << disk.error();
  const std::string checkpoints = disk.path() + "/checkpoints";
  testing::RankProcesses run;
  run.Start(kClip, Train({"--save-every-n-steps", "6", "--checkpoint-dir", checkpoints}), 1, 1, {0},
            dir, {{"DTRAIN_LOG_DIR", dir}});
  ASSERT_TRUE(disk.Move(run.pids[0]));
  auto writing = [&] {  // the checkpoint's temporary file is there until its fsync ends
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(checkpoints, ec)) {
      if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
    }
    return false;
  };
  ASSERT_TRUE(dtrain::testing::WaitFor(writing, 60)) << run.Log(0);
  const auto signalled = Clock::now();
  kill(run.pids[0], SIGTERM);
  EXPECT_EQ(run.Wait(std::chrono::seconds(120)), std::vector<int>({-SIGTERM})) << run.Log(0);
  const double seconds = std::chrono::duration<double>(Clock::now() - signalled).count();
  EXPECT_EQ(LastStep(dir, 0), 6) << run.Log(0);
  EXPECT_NE(run.Log(0).find("stopped by SIGTERM after step 6: " + checkpoints + "/epoch_latest.pt" +
                            kAlreadyWritten),
            std::string::npos)
      << run.Log(0);
  EXPECT_GT(seconds, 2.0) << "the disk was not slow: the test proves nothing";
  std::cout << "ended " << seconds << " s after the signal\n";
}

// --save-on-signal off: SIGTERM ends the process at once, as without a handler; nothing written.
TEST(StopOnSignal, OffEndsAtOnce) {
  const std::string dir = Scratch("dtrain-stop-off");
  const std::string log = SigtermedAtStepFive(dir, {"--save-on-signal", "off"});
  EXPECT_EQ(log.find("stopped by"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir + "/checkpoints/epoch_latest.pt"));
}

}  // namespace
}  // namespace dtrain::clip
