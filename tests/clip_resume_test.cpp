// A job restarted mid-epoch from a --save-every-n-steps checkpoint continues the epoch sample for
// sample: every rank logs the ids it trained on (--log-sample-ids), and the runs interrupted by
// --max-steps and resumed with --resume latest, on the same 2 ranks or on 1, must have trained on
// exactly the samples of an uninterrupted 2-rank run, none skipped and none twice; and so must
// a job whose rank is SIGKILLed, or SIGTERMed, and which dtrain launch restarts.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/metrics_lines.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/test_paths.h"

namespace {

namespace fs = std::filesystem;
const std::string kBin = DTRAIN_BINARY_DIR;

// 64 synthetic samples, 4 per rank per step: 8 steps per epoch on 2 ranks, 16 on 1.
const std::string kTrain =
    " train --dataset-type synthetic --train-num-samples 64 --batch-size 4 --epochs 2"
    " --threads 1 --warmup 2 --seed 7 --zeroshot-frequency 0 --save-frequency 0"
    " --save-every-n-steps 2";

using StepSamples = std::map<long, std::multiset<long>>;  // step -> ids trained on, all ranks

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs dtrain-clip on `ranks` local ranks through dtrain launch, logging sample ids to
// <dir>/samples.log, checkpoints under <dir>/checkpoints and rank output to <dir>/launch/run/.
void Launch(const std::string& dir, int ranks, const std::string& extra) {
  fs::create_directories(dir);
  const std::string command = "cd " + dir + " && NPROC_PER_NODE=" + std::to_string(ranks) + " " +
                              kBin + "/dtrain launch --quiet --log-dir " + dir +
                              "/launch --job run -- " + kBin + "/dtrain-clip" + kTrain +
                              " --logs " + dir + " --log-sample-ids " + dir + "/samples.log " +
                              extra + " >> " + dir + "/output.log 2>&1";
  int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command << "\n"
                                                             << Slurp(dir + "/output.log");
}

StepSamples ReadSamples(const std::string& path) {
  StepSamples steps;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    long step = 0, id = 0;
    fields >> step;
    while (fields >> id) steps[step].insert(id);
  }
  return steps;
}

// What a job trained on: the interrupted run's steps up to the checkpoint, then the resumed run's.
StepSamples Joined(const StepSamples& before, long checkpoint_step, const StepSamples& after) {
  StepSamples joined;
  for (const auto& [step, ids] : before) {
    if (step <= checkpoint_step) joined[step] = ids;
  }
  for (const auto& [step, ids] : after) {
    EXPECT_GT(step, checkpoint_step) << "the resumed run trained step " << step << " again";
    joined[step] = ids;
  }
  return joined;
}

std::multiset<long> Samples(const StepSamples& steps, long first, long last) {
  std::multiset<long> all;
  for (const auto& [step, ids] : steps) {
    if (step >= first && step <= last) all.insert(ids.begin(), ids.end());
  }
  return all;
}

std::string FinalHash(const std::string& dir) {
  return dtrain::test::Field(dtrain::test::EndLines(dir + "/metrics")["rank-0.jsonl"],
                             "param_hash");
}

class ClipResume : public ::testing::Test {
 protected:
  // Once for the suite: the uninterrupted run, and one stopped after step 3 whose last
  // checkpoint is step 2's (step 3 is lost, as the step in flight at a kill would be).
  static void SetUpTestSuite() {
    root_ = dtrain::testing::ScratchDirs::Make("dtrain-clip-resume");
    Launch(root_ + "/straight", 2, "");
    Launch(root_ + "/stopped", 2, "--max-steps 3");
  }
  static std::string Resumed(const std::string& name, int ranks) {
    const std::string dir = root_ + "/" + name;
    fs::create_directories(dir);
    fs::copy(root_ + "/stopped/checkpoints", dir + "/checkpoints", fs::copy_options::recursive);
    Launch(dir, ranks, "--resume latest");
    return dir;
  }
  static std::string root_;
};
std::string ClipResume::root_;

TEST_F(ClipResume, SameRanksTrainEveryStepOnTheSamplesOfAnUninterruptedRun) {
  const StepSamples straight = ReadSamples(root_ + "/straight/samples.log");
  ASSERT_EQ(straight.size(), 16u) << Slurp(root_ + "/straight/output.log");
  for (const auto& [step, ids] : straight) ASSERT_EQ(ids.size(), 8u) << "step " << step;
  const StepSamples stopped = ReadSamples(root_ + "/stopped/samples.log");
  ASSERT_EQ(stopped.size(), 3u) << Slurp(root_ + "/stopped/output.log");

  const std::string dir = Resumed("resumed-2", 2);
  const std::string output = Slurp(dir + "/launch/run/rank-0.log");
  EXPECT_NE(output.find("continues after its first 16 samples (written by 2 rank(s), global "
                        "batch 8; now 2 rank(s), global batch 8)"),
            std::string::npos)
      << output;
  const StepSamples joined = Joined(stopped, 2, ReadSamples(dir + "/samples.log"));
  EXPECT_EQ(joined, straight);
  // Same ranks, same data, same steps: the same weights at the end.
  EXPECT_EQ(FinalHash(dir), FinalHash(root_ + "/straight"));
}

TEST_F(ClipResume, OneRankAfterTwoTrainsEverySampleOfTheEpochOnce) {
  const StepSamples straight = ReadSamples(root_ + "/straight/samples.log");
  const StepSamples stopped = ReadSamples(root_ + "/stopped/samples.log");
  ASSERT_EQ(straight.size(), 16u);

  const std::string dir = Resumed("resumed-1", 1);
  const std::string output = Slurp(dir + "/launch/run/rank-0.log");
  EXPECT_NE(output.find("now 1 rank(s), global batch 4)"), std::string::npos) << output;
  const StepSamples after = ReadSamples(dir + "/samples.log");
  // Epoch 1's remaining 48 samples take 12 steps of 4 on one rank (steps 3..14), epoch 2 then 16.
  ASSERT_EQ(after.size(), 28u) << Slurp(dir + "/output.log");
  EXPECT_EQ(after.begin()->first, 3);
  for (const auto& [step, ids] : after) ASSERT_EQ(ids.size(), 4u) << "step " << step;
  const StepSamples joined = Joined(stopped, 2, after);

  const std::multiset<long> epoch1 = Samples(straight, 1, 8);
  ASSERT_EQ(std::set<long>(epoch1.begin(), epoch1.end()).size(), 64u);
  EXPECT_EQ(Samples(joined, 1, 14), epoch1) << "epoch 1 across the restart";
  EXPECT_EQ(Samples(joined, 15, 30), Samples(straight, 9, 16)) << "epoch 2 after it";
}

// Starts the first attempt's rank 1 under a script that sends it `signal` (kill's name) once step
// 5 is in the attempt's sample log, then runs `dtrain launch --max-restarts 1` over it; the
// second attempt runs as launched. `extra`: more dtrain-clip flags. Returns the output folder.
std::string LaunchSignalledAtStepFive(const std::string& name, const std::string& signal,
                                      const std::string& extra) {
  const std::string dir = dtrain::testing::ScratchDirs::Make("dtrain-clip-resume-" + name);
  const std::string clip = kBin + "/dtrain-clip" + kTrain + " --resume latest --logs " + dir +
                           " --log-sample-ids " + dir + "/samples-$DTRAIN_RESTART_COUNT.log " +
                           extra;
  std::ofstream(dir + "/rank.sh")
      << "log=" << dir << "/samples-0.log\n"
      << "if [ \"$RANK\" = 1 ] && [ \"$DTRAIN_RESTART_COUNT\" = 0 ]; then\n"
      << "  " << clip << " & pid=$!\n"
      << "  while kill -0 $pid 2>/dev/null && ! grep -q '^5 ' $log 2>/dev/null; do sleep 0.02; "
         "done\n"
      << "  kill -" << signal << " $pid; wait $pid; exit $?\n"
      << "fi\n"
      << "exec " << clip << "\n";
  const std::string command = "cd " + dir + " && NPROC_PER_NODE=2 " + kBin +
                              "/dtrain launch --quiet --max-restarts 1 --log-dir " + dir +
                              "/launch --job run -- sh " + dir + "/rank.sh > " + dir +
                              "/output.log 2>&1";
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(dir + "/output.log");
  return dir;
}

// The node-loss case end to end: rank 1 is SIGKILLed mid-epoch (some steps after a step
// checkpoint, perhaps inside one), dtrain launch --max-restarts 1 restarts the job and
// --resume latest takes it on from the last step checkpoint. Each attempt logs its own samples.
TEST_F(ClipResume, KilledRankRestartsAndTheJobTrainsTheSamplesOfAnUninterruptedRun) {
  const StepSamples straight = ReadSamples(root_ + "/straight/samples.log");
  ASSERT_EQ(straight.size(), 16u);
  const std::string dir = LaunchSignalledAtStepFive("killed", "KILL", "");
  const StepSamples first = ReadSamples(dir + "/samples-0.log");
  const StepSamples second = ReadSamples(dir + "/samples-1.log");
  ASSERT_FALSE(second.empty()) << "no restart after the kill: " << Slurp(dir + "/output.log");
  // The restart began right after the checkpoint it resumed from: a step one of the first
  // attempt saved (every 2), at or after step 4 (step 5 was seen before the kill).
  const long checkpoint = second.begin()->first - 1;
  std::cout << "first attempt reached step " << (first.empty() ? 0 : first.rbegin()->first)
            << "; the restart resumed after step " << checkpoint << std::endl;
  EXPECT_GE(checkpoint, 4);
  EXPECT_EQ(checkpoint % 2, 0);
  ASSERT_FALSE(first.empty());
  EXPECT_LE(checkpoint, first.rbegin()->first);
  // Steps of the first attempt after the checkpoint (the one in flight at the kill among them)
  // are trained again; all others exactly as in the uninterrupted run.
  EXPECT_EQ(Joined(first, checkpoint, second), straight);
}

// A rank that is sent SIGTERM (by whatever takes its node out of the job) no longer loses the
// steps since the last checkpoint: with no step checkpoints at all (epoch_N.pt only), both ranks
// stop after the same step, write epoch_latest.pt there and end by SIGTERM; the restart resumes
// right after it, trains no step twice, and the job's samples are the uninterrupted run's.
TEST_F(ClipResume, SigtermedRankStopsTheJobAtOneStepAndTheRestartLosesNone) {
  const StepSamples straight = ReadSamples(root_ + "/straight/samples.log");
  ASSERT_EQ(straight.size(), 16u);
  const std::string dir =
      LaunchSignalledAtStepFive("sigterm", "TERM", "--save-every-n-steps 0 --save-frequency 1");
  const StepSamples first = ReadSamples(dir + "/samples-0.log");
  const StepSamples second = ReadSamples(dir + "/samples-1.log");
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(second.empty()) << "no restart after the signal: " << Slurp(dir + "/output.log");
  const long stopped = first.rbegin()->first;
  EXPECT_GE(stopped, 5);
  EXPECT_EQ(second.begin()->first, stopped + 1) << Slurp(dir + "/output.log");
  EXPECT_EQ(Joined(first, stopped, second), straight);
  const std::string rank0 = Slurp(dir + "/launch/run/rank-0.log");
  EXPECT_NE(rank0.find("stopped by SIGTERM after step " + std::to_string(stopped) +
                       ", the step every rank stopped at: " + dir +
                       "/checkpoints/epoch_latest.pt written in "),
            std::string::npos)
      << rank0;
}

}  // namespace
