// A flaky link during a run, on real sshd nodes in network namespaces that look like HGX H100
// nodes with an InfiniBand port (nvidia-smi stand-ins first on each node's PATH, a sysfs stand-in
// under DTRAIN_PROBE_SYSFS): once the job runs, node1's GPU 5 starts replaying on its PCIe link
// and its port mlx5_0/1 goes down and comes back. The health watch says so within its interval,
// once, on the console and in job.json, and the job runs to its end on the same nodes.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/checkpointed_rank.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/nvidia_smi_fixture.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using test::CheckpointStep;
using test::kCheckpointedRankScript;
using test::ReadText;
using test::SshTestCluster;
using testing::DtrainProcess;

// `text` written to `path` whole (a temporary file renamed over it): a reader never sees half.
void Replace(const std::string& path, const std::string& text) {
  std::ofstream(path + ".new") << text;
  std::filesystem::rename(path + ".new", path);
}

TEST(FlakyLink, ErrorsGrowingDuringTheRunAreAWarningAndTheJobGoesOn) {
  SshTestCluster cluster("flaky-link", 3, 1);
  if (cluster.error().find("needs root") != std::string::npos) GTEST_SKIP() << cluster.error();
  ASSERT_TRUE(cluster.error().empty()) << cluster.error();
  for (int i = 0; i < 3; ++i) {
    const std::string node = cluster.dir() + "/node" + std::to_string(i);
    test::WriteStandIns(node + "-bin", test::HgxQuery(), "[    1.0] Linux version 6.1\n");
    test::WriteInfiniband(node + "-sys", "mlx5_0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
  }
  const std::string file = test::StandInClusterFile(cluster, 3, "");
  const std::string dir = testing::ScratchDirs::Make("flaky-link");
  std::vector<std::string> args = {
      "launch", "-c", file, "--job", "flaky", "--log-dir", dir, "--health-watch", "1", "--quiet"};
  for (const char* word : {"--", "sh", "-c", kCheckpointedRankScript, "nodeloss-rank"})
    args.push_back(word);
  DtrainProcess dtrain(args, dir);
  const std::string job_dir = dir + "/flaky";
  const auto up_until = Clock::now() + std::chrono::seconds(30);
  while (CheckpointStep(job_dir) < 4 && Clock::now() < up_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(CheckpointStep(job_dir), 4) << dtrain.err();
  EXPECT_EQ(dtrain.err().find("link errors"), std::string::npos)
      << "healthy links, counters unchanged: " << dtrain.err();

  // The port goes down and comes back; GPU 5's link replays 500 times.
  const std::string node1 = cluster.dir() + "/node1";
  Replace(node1 + "-sys/class/infiniband/mlx5_0/ports/1/counters/link_downed", "1\n");
  Replace(node1 + "-bin/q.txt",
          test::WithField(test::HgxQuery(), 5, "PCI", "Replays Since Reset", "501"));
  const auto broken = Clock::now();
  double found_s = -1;
  while (Clock::now() - broken < std::chrono::seconds(15) && dtrain.running()) {
    const std::string err = dtrain.err();
    if (err.find("GPU 5 PCIe replays +500") != std::string::npos &&
        err.find("mlx5_0/1 link_downed +1 (went down and came back)") != std::string::npos) {
      found_s = std::chrono::duration<double>(Clock::now() - broken).count();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const int status = dtrain.Wait(60);
  const std::string err = dtrain.err();
  std::printf("flaky link on node1: said after %.2f s\n%s", found_s, err.c_str());
  EXPECT_GE(found_s, 0) << err;
  EXPECT_LE(found_s, 3) << "the interval (1 s) and one round of probes: " << err;
  EXPECT_NE(err.find("dtrain: warning: node node1: link errors grew in "), std::string::npos)
      << err;
  EXPECT_EQ(err.find("node node0: link"), std::string::npos) << err;
  EXPECT_EQ(err.find("node node2: link"), std::string::npos) << err;

  // The job was not stopped: one attempt, on the same nodes, to its end.
  EXPECT_EQ(status, 0) << err;
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << err;
  ASSERT_EQ(record["attempts"].size(), 1u) << record.dump(2);
  EXPECT_EQ(record["attempts"][0]["nodes"], json({"node0", "node1", "node2"}));
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(CheckpointStep(job_dir), 40);
  // Said once (two warnings at most, when a round read the two faults apart), though the
  // counters stay grown and the watch goes on.
  std::string said;
  int warnings = 0;
  for (const json& e : record["events"]) {
    if (e["kind"] != "health_warning") continue;
    ++warnings;
    said += e["text"].get<std::string>() + "\n";
  }
  EXPECT_GE(warnings, 1) << record["events"].dump(2);
  EXPECT_LE(warnings, 2) << said;
  EXPECT_NE(said.find("GPU 5 PCIe replays +500"), std::string::npos) << said;
  EXPECT_NE(said.find("mlx5_0/1 link_downed +1"), std::string::npos) << said;
  EXPECT_EQ(said.find("node0"), std::string::npos) << said;

  // `dtrain status` says them too.
  DtrainProcess shown({"status", "--job", "flaky", "--log-dir", dir}, dir);
  EXPECT_EQ(shown.Wait(30), 0) << shown.err();
  EXPECT_NE(shown.out().find("warning: node node1: link errors grew in "), std::string::npos)
      << shown.out();
}

}  // namespace
}  // namespace dtrain
