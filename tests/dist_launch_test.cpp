// dtrain-clip through `dtrain launch`: two local ranks on Fashion-MNIST (Gloo) end with identical
// parameters; a rank killed mid-training brings the job down and --max-restarts 1 with
// --resume latest finishes it from the last checkpoint.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "tests/metrics_lines.h"
#include "tests/scratch_dirs.h"

namespace {

namespace fs = std::filesystem;
using dtrain::test::EndLines;
using dtrain::test::Field;
const std::string kBin = DTRAIN_BINARY_DIR;

std::string TempDir() {
  return dtrain::testing::ScratchDirs::Make("dtrain-dist-launch");
}

int RunShell(const std::string& command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const std::string kTrain =
    " train --batch-size 32 --zeroshot-frequency 0 --gather-with-grad --threads 1";

TEST(DistLaunch, TwoRanksEndWithIdenticalParameters) {
  std::string dir = TempDir();
  int code = RunShell("cd " + dir + " && NPROC_PER_NODE=2 " + kBin + "/dtrain launch --quiet " +
                      "--timeline --log-dir " + dir + "/logs --job e2e -- " + kBin +
                      "/dtrain-clip" + kTrain + " --max-steps 5 --save-frequency 0 " +
                      "--timeline-mark-cycles --logs " + dir + "/ck > " + dir + "/launch.log 2>&1");
  ASSERT_EQ(code, 0) << "see " << dir << "/launch.log";
  auto ends = EndLines(dir);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "param_hash"), Field(ends["rank-1.jsonl"], "param_hash"));
  EXPECT_FALSE(Field(ends["rank-0.jsonl"], "param_hash").empty());
  EXPECT_EQ(Field(ends["rank-1.jsonl"], "step"), "5");
  // Every rank wrote its trace, and --timeline-mark-cycles marked the gradient cycles in it.
  for (const char* rank : {"0", "1"}) {
    std::ifstream trace(dir + "/logs/e2e/timeline/rank-" + rank + ".json");
    std::string text((std::istreambuf_iterator<char>(trace)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("\"CYCLE_START\""), std::string::npos) << "rank " << rank;
    EXPECT_NE(text.find("\"GLOO_ALLREDUCE\""), std::string::npos) << "rank " << rank;
  }
}

TEST(DistLaunch, KilledRankRestartsAndResumesFromTheLastCheckpoint) {
  std::string dir = TempDir();
  // Rank 1 of the first attempt is killed once epoch 1's checkpoint exists.
  std::string clip = kBin + "/dtrain-clip" + kTrain +
                     " --epochs 6 --train-num-samples 192 --save-frequency 1 --resume latest"
                     " --logs " +
                     dir + "/ck";
  std::ofstream(dir + "/rank.sh") << "if [ \"$RANK\" = 1 ] && [ ! -e " << dir << "/killed ]; then\n"
                                  << "  touch " << dir << "/killed\n"
                                  << "  " << clip << " & pid=$!\n"
                                  << "  while [ ! -e " << dir
                                  << "/ck/checkpoints/epoch_1.pt ]; do sleep 0.05; done\n"
                                  << "  kill -9 $pid; wait $pid; exit 137\n"
                                  << "fi\n"
                                  << "exec " << clip << "\n";
  int code = RunShell("cd " + dir + " && NPROC_PER_NODE=2 " + kBin + "/dtrain launch --quiet " +
                      "--max-restarts 1 --log-dir " + dir + "/logs --job restart -- sh " + dir +
                      "/rank.sh > " + dir + "/launch.log 2>&1");
  ASSERT_EQ(code, 0) << "see " << dir << "/launch.log";
  EXPECT_TRUE(fs::exists(dir + "/killed"));
  EXPECT_TRUE(fs::exists(dir + "/ck/checkpoints/epoch_6.pt"));
  auto ends = EndLines(dir);
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "param_hash"), Field(ends["rank-1.jsonl"], "param_hash"));
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "step"), "18");
}

}  // namespace
