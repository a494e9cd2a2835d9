// dtrain-clip on nodes without shared storage goes on after rank 0's node is lost: the job's log
// folder is /srv/node/..., private to every namespace node (tests/cluster/make-cluster.sh), so
// each rank's $DTRAIN_LOG_DIR, and its checkpoints, are on its own node. Rank 0's node has its
// link cut (`ip link set eth0 down`) once a step checkpoint is written; the restart runs on the
// other node and the spare, and both ranks resume from the copy the other node kept
// (runtime/train/node_local_checkpoints.h), the spare's rank taking it over the job's Gloo group;
// job.json has the first attempt's steps from node1's metrics, rank 0's being on the lost node.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/support/clip_fault_job.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using nlohmann::json;
using test::ReadText;
using test::SshTestCluster;
using testing::DtrainProcess;

// The text of `log` after the line dtrain writes where the restart begins.
std::string AfterRestart(const std::string& log) {
  const size_t at = log.find("--- dtrain: restart 1");
  return at == std::string::npos ? "" : log.substr(at);
}

std::string ParamHash(const std::string& log) {
  const std::string key = "param hash ";
  const size_t at = log.rfind(key);
  return at == std::string::npos ? "" : log.substr(at + key.size(), 16);
}

TEST(ClipNodeLoss, RankZerosNodeLostTheJobResumesFromTheCopyAnotherNodeKept) {
  SshTestCluster cluster("clip-node-loss", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = test::FreshPrivateFolder("clip-node-loss");
  // A checkpoint every 2 steps, on every node (tests/support/clip_fault_job.h); node0 is lost 3 s
  // after its link is cut.
  DtrainProcess dtrain(testing::ClipFaultJob(cluster.cluster_file(), logs, {"--node-timeout", "3"}),
                       logs);
  const std::string job = logs + "/clip";
  // Step 6 on rank 1 (node1): the checkpoint of step 4 is complete on both nodes.
  const bool stepped = testing::WaitFor(
      [&] { return ReadText(job + "/rank-1.log").find(" step 6/300 ") != std::string::npos; }, 60);
  ASSERT_TRUE(stepped) << dtrain.err() << ReadText(job + "/rank-1.log");
  cluster.OnNode(0, "ip link set eth0 down");
  const int status = dtrain.Wait(120);
  cluster.OnNode(0, "ip link set eth0 up");
  const std::string err = dtrain.err();
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(err.find("node node0 lost"), std::string::npos) << err;

  const json record = json::parse(ReadText(job + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << err;
  ASSERT_EQ(record["attempts"].size(), 2u) << record.dump(2);
  EXPECT_EQ(record["attempts"][1]["nodes"], json({"node1", "node2"})) << record.dump(2);

  const std::string first = ReadText(job + "/rank-0.log");
  EXPECT_NE(first.find("checkpoints: written by ranks 0 and 1 (their nodes do not share rank "
                       "0's " +
                       job + "/checkpoints)"),
            std::string::npos)
      << first;
  // The restart: rank 0 (node1) from its own copy, rank 1 (node2, the spare) from rank 0's.
  const std::string rank0 = AfterRestart(first);
  const std::string rank1 = AfterRestart(ReadText(job + "/rank-1.log"));
  const std::string own = "resumed from " + job + "/checkpoints/epoch_latest.pt: epoch 0, step ";
  const size_t at = rank0.find(own);
  ASSERT_NE(at, std::string::npos) << rank0;
  const int step = std::atoi(rank0.c_str() + at + own.size());
  EXPECT_GE(step, 4) << rank0;
  EXPECT_NE(rank1.find("resumed from rank 0's checkpoint (none in " + job +
                       "/checkpoints here): epoch 0, step " + std::to_string(step) + "\n"),
            std::string::npos)
      << rank1;
  // The first attempt's steps (its rank 0's node is lost, and with it rank 0's metrics) come
  // from node1's rank 1 (launcher/attempt_steps.h): the steps lost are those after the checkpoint.
  const json& cut = record["attempts"][0];
  ASSERT_TRUE(cut["last_step"].is_number_integer()) << record.dump(2);
  EXPECT_GE(cut["last_step"].get<int>(), 6) << record.dump(2);
  ASSERT_TRUE(cut.contains("steps_lost")) << record.dump(2);
  EXPECT_EQ(cut["steps_lost"].get<int>(), cut["last_step"].get<int>() - step) << record.dump(2);
  EXPECT_NE(err.find(std::to_string(cut["steps_lost"].get<int>()) + " step(s) lost"),
            std::string::npos)
      << err;
  EXPECT_NE(rank0.find("done: "), std::string::npos) << rank0;
  EXPECT_EQ(ParamHash(rank0).size(), 16u) << rank0;
  EXPECT_EQ(ParamHash(rank1), ParamHash(rank0)) << rank1;
}

}  // namespace
}  // namespace dtrain
