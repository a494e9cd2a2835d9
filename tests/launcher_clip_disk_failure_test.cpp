// A node's drive fails while dtrain-clip trains on nodes without shared storage: node1's job
// folder (/srv/node/..., private to every namespace node) is an ext4 disk of its own
// (tests/support/loop_disk.h), mounted in node1 alone, and it is taken away once a step
// checkpoint is on every node, as an NVMe drive falls off the bus. Rank 1's next checkpoint write
// fails and the rank ends saying so; the check before the restart writes in the job's folder on
// each node (dtrain-doctor(1) disk-write) and leaves node1 out, and the restart runs on node0 and
// the spare, resuming from node0's copy. Before, node1 passed that check, and the job, every rank
// of which had failed within 10 s of the start, was not restarted at all.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/clip_fault_job.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/loop_disk.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using nlohmann::json;
using test::ReadText;
using test::SshTestCluster;
using testing::DtrainProcess;

TEST(ClipDiskFailure, NodeWhoseDriveFailsIsLeftOutAndTheSpareTakesItsPlace) {
  SshTestCluster cluster("clip-disk", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = test::FreshPrivateFolder("clip-disk");
  const std::string job = logs + "/clip";
  // Node1's job folder, on node1 only; unmounted before the cluster goes. 2 GB (sparse): less
  // than 1 GiB free would fail the check before the start (dtrain-doctor(1) disk).
  testing::LoopDisk disk(testing::ScratchDirs::Make("clip-disk"), "2G", cluster.InNode(1), job);
  ASSERT_EQ(disk.error(), "");
  // A checkpoint every 2 steps, on every node (tests/support/clip_fault_job.h).
  DtrainProcess dtrain(testing::ClipFaultJob(cluster.cluster_file(), logs), logs);
  // Step 6 on rank 1 (node1): the checkpoint of step 4 is on both nodes.
  const bool stepped = testing::WaitFor(
      [&] { return ReadText(job + "/rank-1.log").find(" step 6/300 ") != std::string::npos; }, 60);
  ASSERT_TRUE(stepped) << dtrain.err() << ReadText(job + "/rank-1.log");
  ASSERT_TRUE(disk.Fail()) << disk.error();
  const int status = dtrain.Wait(120);
  const std::string err = dtrain.err();
  EXPECT_EQ(status, 0) << err;

  const std::string rank1 = ReadText(job + "/rank-1.log");
  const size_t restart = rank1.find("--- dtrain: restart 1");
  ASSERT_NE(restart, std::string::npos) << rank1;
  const std::string first = rank1.substr(0, restart);
  // The first write after the drive went: the part's sync (fsync: EIO), the folder's sync after
  // the rename when the drive went between the two, or the part's creation once ext4 has
  // aborted its journal (EROFS). Each ends rank 1 with an error naming the checkpoint.
  EXPECT_NE(first.find("dtrain-clip: error: " + job + "/checkpoints/epoch_latest.pt"),
            std::string::npos)
      << first;
  // Node1 failed the check before the restart for its drive (the job's folder there), and was
  // left out.
  EXPECT_NE(err.find("node node1 quarantined in job clip: failed the health check before restart: "
                     "node node1: cannot write in log dir " +
                     job + ": "),
            std::string::npos)
      << err;
  // Every rank failed within seconds of the start, alike, as a script error does; the node found
  // unfit makes it a node's fault, and the job restarts.
  EXPECT_NE(err.find("attempt 1 on node0,node1: error (node node1 blamed): every rank exited with "
                     "1 within 10 s of the start, and node node1 failed the health check before "
                     "the restart"),
            std::string::npos)
      << err;
  const json record = json::parse(ReadText(job + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << err;
  ASSERT_EQ(record["attempts"].size(), 2u) << record.dump(2);
  EXPECT_EQ(record["attempts"][1]["nodes"], json({"node0", "node2"})) << record.dump(2);
  EXPECT_EQ(record["status"], "succeeded") << record.dump(2);
  // The spare's rank took rank 0's checkpoint over the job's Gloo group.
  EXPECT_NE(rank1.find("resumed from rank 0's checkpoint (none in " + job +
                       "/checkpoints here): epoch 0, step "),
            std::string::npos)
      << rank1.substr(restart);
}

}  // namespace
}  // namespace dtrain
