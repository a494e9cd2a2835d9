// Checkpoints on nodes without shared storage (runtime/train/node_local_checkpoints.h): two real
// dtrain-clip ranks on Gloo over loopback, each the first rank of a node of its own, with
// DTRAIN_LOG_DIR on the node's "own disk" (a folder per rank), as dtrain launch sets it on SSH
// nodes that share nothing. Every node keeps a copy of the checkpoints, and a resume takes the
// newest copy any node holds on every rank, to the same parameters as a resume from one shared
// folder. Before, only rank 0 wrote one, a rank without one started afresh beside a resumed rank
// 0, and the two hung at the epoch's end.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tests/support/dist_ranks.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/test_paths.h"

namespace dtrain::clip {
namespace {

namespace fs = std::filesystem;
const std::string kClip = std::string(DTRAIN_BINARY_DIR) + "/dtrain-clip";

// fmnist-tiny on 640 synthetic samples, 16 a rank a step: 20 steps on 2 ranks, a step checkpoint
// (epoch_latest.pt) every 5.
const std::vector<std::string> kTrain = {
    "train",     "--model",          "fmnist-tiny", "--dataset-type",
    "synthetic", "--batch-size",     "16",          "--train-num-samples",
    "640",       "--epochs",         "1",           "--zeroshot-frequency",
    "0",         "--save-frequency", "0",           "--save-every-n-steps",
    "5",         "--threads",        "1",           "--seed",
    "0"};

struct RanksRun {
  std::vector<int> codes;
  std::vector<std::string> logs;
};

// Two ranks, a node each; `log_dirs` is DTRAIN_LOG_DIR per rank ("{rank}" becomes the rank).
RanksRun TrainTwoRanks(const std::string& log_dirs, const std::vector<std::string>& extra) {
  std::vector<std::string> args = kTrain;
  args.insert(args.end(), extra.begin(), extra.end());
  const std::string out = dtrain::testing::ScratchDirs::Make("dtrain-node-ckpt-out");
  testing::RankProcesses ranks;
  ranks.Start(kClip, args, /*world=*/2, /*local_world=*/1, {0, 1}, out,
              {{"DTRAIN_LOG_DIR", log_dirs}});
  RanksRun run;
  // A run takes a few seconds; the deadline ends one that hangs.
  run.codes = ranks.Wait(std::chrono::seconds(90));
  for (size_t r = 0; r < 2; ++r) run.logs.push_back(ranks.Log(r));
  return run;
}

std::string ParamHash(const std::string& log) {
  const std::string key = "param hash ";
  const size_t at = log.rfind(key);
  return at == std::string::npos ? "" : log.substr(at + key.size(), 16);
}

std::string Latest(const std::string& node_dir) {
  return node_dir + "/checkpoints/epoch_latest.pt";
}

void PutCheckpoint(const std::string& from, const std::string& node_dir) {
  fs::create_directories(node_dir + "/checkpoints");
  fs::copy_file(from, Latest(node_dir), fs::copy_options::overwrite_existing);
}

// The first 64 KiB of `path`, in a file of its own.
std::string CutShort(const std::string& path) {
  const std::string cut = dtrain::testing::ScratchDirs::Make("dtrain-node-ckpt-cut") + "/cut.pt";
  fs::copy_file(path, cut);
  fs::resize_file(cut, 64 * 1024);
  return cut;
}

class NodeLocalCheckpoints : public ::testing::Test {
 protected:
  // Once: the checkpoints of steps 5 and 10 written into one shared folder, and the parameters
  // of the run resumed there from step 10 (what every resume below must end with).
  static void SetUpTestSuite() {
    const std::string shared = dtrain::testing::ScratchDirs::Make("dtrain-node-ckpt-shared");
    const std::string saved = dtrain::testing::ScratchDirs::Make("dtrain-node-ckpt-saved");
    for (const char* steps : {"5", "10"}) {
      RanksRun run = TrainTwoRanks(shared, {"--max-steps", steps});
      ASSERT_EQ(run.codes, std::vector<int>({0, 0})) << run.logs[0] << run.logs[1];
      // One folder for both: rank 0 writes the checkpoints, and says nothing of other keepers.
      EXPECT_EQ(run.logs[0].find("checkpoints: written by"), std::string::npos) << run.logs[0];
      fs::copy_file(Latest(shared), saved + "/step" + steps + ".pt");
    }
    step5_ = saved + "/step5.pt";
    step10_ = saved + "/step10.pt";
    RanksRun resumed = TrainTwoRanks(shared, {"--resume", "latest"});
    ASSERT_EQ(resumed.codes, std::vector<int>({0, 0})) << resumed.logs[0] << resumed.logs[1];
    ASSERT_EQ(ParamHash(resumed.logs[0]).size(), 16u) << resumed.logs[0];
    ASSERT_EQ(ParamHash(resumed.logs[1]), ParamHash(resumed.logs[0])) << resumed.logs[1];
    reference_hash_ = ParamHash(resumed.logs[0]);
  }

  // Puts `copy0` and `copy1` (a checkpoint file each, "" for none) into the two nodes' folders
  // and resumes: both ranks must end on the shared folder's parameters, and rank `rank` say
  // `said` ("NODES" there: the folder of the nodes' folders).
  static void ResumeFrom(const std::string& copy0, const std::string& copy1, int rank,
                         std::string said) {
    const std::string nodes = dtrain::testing::ScratchDirs::Make("dtrain-node-ckpt");
    if (!copy0.empty()) PutCheckpoint(copy0, nodes + "/node0");
    if (!copy1.empty()) PutCheckpoint(copy1, nodes + "/node1");
    RanksRun run = TrainTwoRanks(nodes + "/node{rank}", {"--resume", "latest"});
    EXPECT_EQ(run.codes, std::vector<int>({0, 0})) << run.logs[0] << run.logs[1];
    for (const std::string& log : run.logs) {
      EXPECT_NE(log.find("epoch 0, step 10"), std::string::npos) << log;
      EXPECT_EQ(ParamHash(log), reference_hash_) << log;
    }
    said.replace(said.find("NODES"), 5, nodes);
    EXPECT_NE(run.logs[rank].find(said), std::string::npos) << run.logs[rank];
  }

  void SetUp() override {
    if (reference_hash_.empty()) GTEST_SKIP() << "the shared folder's runs failed (above)";
  }

  static inline std::string step5_, step10_, reference_hash_;
};

TEST_F(NodeLocalCheckpoints, EveryNodeKeepsACopyWhenItDoesNotSeeRankZerosFolder) {
  const std::string nodes = dtrain::testing::ScratchDirs::Make("dtrain-node-ckpt");
  RanksRun run = TrainTwoRanks(nodes + "/node{rank}", {"--max-steps", "5"});
  ASSERT_EQ(run.codes, std::vector<int>({0, 0})) << run.logs[0] << run.logs[1];
  EXPECT_TRUE(fs::exists(Latest(nodes + "/node0")));
  EXPECT_TRUE(fs::exists(Latest(nodes + "/node1"))) << "node1 keeps no checkpoint of its own";
  EXPECT_NE(run.logs[0].find("checkpoints: written by ranks 0 and 1 (their nodes do not share "
                             "rank 0's " +
                             nodes + "/node0/checkpoints)"),
            std::string::npos)
      << run.logs[0];
  // Rank 0's probe of the folders is gone.
  for (const auto& entry : fs::directory_iterator(nodes + "/node0/checkpoints")) {
    EXPECT_EQ(entry.path().filename().string().rfind(".dtrain-clip-shared-", 0), std::string::npos)
        << entry.path();
  }
}

TEST_F(NodeLocalCheckpoints, ARankWhoseNodeHasNoneTakesRankZeros) {
  ResumeFrom(step10_, "", 1,
             "resumed from rank 0's checkpoint (none in NODES/node1/checkpoints here): epoch 0, "
             "step 10");
}

// Rank 0's node was lost and replaced: the only copy is on rank 1's node.
TEST_F(NodeLocalCheckpoints, RankZeroTakesTheCopyOfAnotherNode) {
  ResumeFrom("", step10_, 0,
             "resumed from rank 1's checkpoint (none in NODES/node0/checkpoints here): epoch 0, "
             "step 10");
}

TEST_F(NodeLocalCheckpoints, TheNewestCopyWinsOverAnOlderOne) {
  ResumeFrom(step5_, step10_, 0,
             "resumed from rank 1's checkpoint (the one in NODES/node0/checkpoints here is of "
             "step 5): epoch 0, step 10");
}

// A node's copy cut short (a crash of its file system, a bad disk): that rank takes another's.
TEST_F(NodeLocalCheckpoints, ARankWhoseOwnCopyCannotBeReadTakesAnothers) {
  ResumeFrom(step10_, CutShort(step10_), 1,
             "resumed from rank 0's checkpoint (NODES/node1/checkpoints/epoch_latest.pt: not a "
             "readable dtrain-clip checkpoint (");
}

TEST_F(NodeLocalCheckpoints, NoReadableCopyStopsEveryRankWithWhy) {
  const std::string nodes = dtrain::testing::ScratchDirs::Make("dtrain-node-ckpt");
  const std::string cut = CutShort(step10_);
  PutCheckpoint(cut, nodes + "/node0");
  PutCheckpoint(cut, nodes + "/node1");
  RanksRun run = TrainTwoRanks(nodes + "/node{rank}", {"--resume", "latest"});
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(run.codes[r], 0) << run.logs[r];
    EXPECT_NE(run.logs[r].find(nodes + "/node" + std::to_string(r) +
                               "/checkpoints/epoch_latest.pt: not a readable dtrain-clip "
                               "checkpoint ("),
              std::string::npos)
        << run.logs[r];
    EXPECT_NE(run.logs[r].find("; no other rank holds a copy"), std::string::npos) << run.logs[r];
  }
}

TEST_F(NodeLocalCheckpoints, ACheckpointNoNodeHasStopsEveryRankWithWhy) {
  const std::string nodes = dtrain::testing::ScratchDirs::Make("dtrain-node-ckpt");
  RanksRun run = TrainTwoRanks(nodes + "/node{rank}", {"--resume", nodes + "/none.pt"});
  EXPECT_NE(run.codes[0], 0);
  EXPECT_NE(run.codes[1], 0);
  for (const std::string& log : run.logs) {
    EXPECT_NE(log.find(nodes + "/none.pt: --resume checkpoint not found on any rank's node"),
              std::string::npos)
        << log;
  }
}

}  // namespace
}  // namespace dtrain::clip
