// A quarantined node returns to a job running short of nodes, as torchrun's agents take a node
// back under --nnodes MIN:MAX. Real faults on sshd nodes in network namespaces: node1's link is
// cut (`ip link set eth0 down`) and, once dtrain has named it lost and gone on with two nodes,
// restored. The health watch's rounds (--health-watch 1) probe node1 again; when it has passed
// two rounds in a row, the job restarts on all three nodes from its checkpoint, and that restart
// is not counted against --max-restarts.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/checkpointed_rank.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using test::ReadText;
using test::SshTestCluster;
using testing::DtrainProcess;

// Seconds since `start`.
double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Waits (at most `timeout_s`) for `text` on dtrain's stderr; the seconds since `start` it took,
// -1 if it never came.
double WaitForText(const DtrainProcess& dtrain, const std::string& text, Clock::time_point start,
                   double timeout_s) {
  while (Since(start) < timeout_s) {
    if (dtrain.err().find(text) != std::string::npos) return Since(start);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// The checkpointed rank (tests/support/checkpointed_rank.h) counting to 100 steps instead of 40:
// 25 s, long enough for a loss, a restart and a return.
std::string LongerCheckpointedRank() {
  std::string script = test::kCheckpointedRankScript;
  const std::string forty = "-lt 40";
  script.replace(script.find(forty), forty.size(), "-lt 100");
  return script;
}

TEST(NodeReturn, CutNodeThatAnswersAgainRejoinsTheJob) {
  SshTestCluster cluster("node-return", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("node-return");
  const std::string script = LongerCheckpointedRank();
  DtrainProcess dtrain({"launch",
                        "-c",
                        cluster.cluster_file(),
                        "--job",
                        "back",
                        "--log-dir",
                        dir,
                        "--node-timeout",
                        "3",
                        "--grace-period",
                        "2",
                        "--max-restarts",
                        "1",
                        "--nnodes",
                        "2:3",
                        "--health-watch",
                        "1",
                        "--quiet",
                        "--",
                        "sh",
                        "-c",
                        script,
                        "nodeloss-rank"},
                       dir);
  const std::string job_dir = dir + "/back";
  ASSERT_TRUE(test::WaitForStep(job_dir, 4)) << dtrain.err();
  cluster.OnNode(1, "ip link set eth0 down");
  const Clock::time_point cut = Clock::now();
  const double lost_s = WaitForText(dtrain, "node node1 lost", cut, 20);
  cluster.OnNode(1, "ip link set eth0 up");
  const Clock::time_point restored = Clock::now();
  const std::string back =
      "dtrain: node node1 passed the health checks 2 rounds in a row; job "
      "back restarts on node0,node1,node2 to take it back (not counted "
      "against --max-restarts)";
  const double back_s = WaitForText(dtrain, back, restored, 40);
  std::printf("node1 cut: lost after %.2f s; link restored: taken back after %.2f s\n", lost_s,
              back_s);
  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  const std::string err = dtrain.err();
  std::printf("%s", err.c_str());
  EXPECT_GE(lost_s, 2.5) << err;
  EXPECT_LE(lost_s, 4) << err;
  // Two rounds a second apart, each a probe of the node (a fresh ssh connection after the cut).
  EXPECT_GE(back_s, 1) << err;
  EXPECT_LE(back_s, 15) << err;
  EXPECT_NE(err.find("dtrain: node node1 quarantined in job back: node node1 lost"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("restarting job back (restart 1 of 1) in 1 s on node0,node2; cause: "
                     "node-lost"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("all 1 restart(s) used"), std::string::npos) << err;

  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  const json& attempts = record["attempts"];
  ASSERT_EQ(attempts.size(), 3u) << attempts.dump(2);
  EXPECT_EQ(attempts[0]["cause"], "node-lost");
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2"}));
  EXPECT_EQ(attempts[1]["cause"], "node-returned");
  EXPECT_EQ(attempts[2]["nodes"], json({"node0", "node1", "node2"}));
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(record["world_size"], 3);
  for (const json& node : record["nodes"]) EXPECT_FALSE(node.contains("quarantined")) << node;
  EXPECT_NE(record.dump().find("\"node_returned\""), std::string::npos);

  // node1's rank ran again in the third attempt, from rank 0's checkpoint, to the end.
  const std::string log1 = ReadText(job_dir + "/rank-1.log");
  const size_t again = log1.find("--- dtrain: restart to take node node1 back ---");
  ASSERT_NE(again, std::string::npos) << log1;
  const std::string prefix = "rank 1 of 3 on node1 starts at step ";
  const size_t at = log1.find(prefix, again);
  ASSERT_NE(at, std::string::npos) << log1;
  EXPECT_GT(std::atoi(log1.c_str() + at + prefix.size()), 4) << log1;
  EXPECT_NE(log1.find("rank 1 done", at), std::string::npos) << log1;
  for (int node = 0; node < 3; ++node) {
    for (const std::string& p : cluster.NodeProcesses(node)) {
      EXPECT_EQ(p.find("nodeloss-rank"), std::string::npos) << "node" << node << ": " << p;
    }
  }
}

}  // namespace
}  // namespace dtrain
