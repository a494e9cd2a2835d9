// A flaky link during a run, on real sshd nodes in network namespaces that look like HGX H100
// nodes with an InfiniBand port (nvidia-smi stand-ins first on each node's PATH, a sysfs stand-in
// under DTRAIN_PROBE_SYSFS): once the job runs, node1's GPU 5 starts replaying on its PCIe link,
// GPU 2's NVLink 7 retrains, its port mlx5_0/1 goes down and comes back, and the NIC's own PCIe
// link counts correctable errors. The health watch says
// so within its interval, once, on the console and in job.json, and the job runs to its end on the
// same nodes. When an attempt then fails (a collective times out on another node), the job goes on
// without node1 if a spare can take its place, and keeps it if none can.
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
using test::WaitForStep;
using testing::DtrainProcess;

// `text` written to `path` whole (a temporary file renamed over it): a reader never sees half.
void Replace(const std::string& path, const std::string& text) {
  std::ofstream(path + ".new") << text;
  std::filesystem::rename(path + ".new", path);
}

// The first `nodes` nodes of `cluster` made to look like HGX H100 nodes with one InfiniBand port,
// mlx5_0/1, its error counters at 0; the cluster file that puts the stand-ins there.
std::string HgxNodesWithPort(const SshTestCluster& cluster, int nodes) {
  for (int i = 0; i < nodes; ++i) {
    const std::string node = cluster.dir() + "/node" + std::to_string(i);
    test::WriteStandIns(node + "-bin", test::HgxQuery(), "[    1.0] Linux version 6.1\n");
    test::WriteInfiniband(node + "-sys", "mlx5_0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
    test::WriteNicAer(node + "-sys", "mlx5_0", 0, 0, 0);
  }
  return test::StandInClusterFile(cluster, nodes, "");
}

TEST(FlakyLink, ErrorsGrowingDuringTheRunAreAWarningAndTheJobGoesOn) {
  SshTestCluster cluster("flaky-link", 3, 1);
  if (cluster.error().find("needs root") != std::string::npos) GTEST_SKIP() << cluster.error();
  ASSERT_TRUE(cluster.error().empty()) << cluster.error();
  const std::string file = HgxNodesWithPort(cluster, 3);
  const std::string dir = testing::ScratchDirs::Make("flaky-link");
  std::vector<std::string> args = {
      "launch", "-c", file, "--job", "flaky", "--log-dir", dir, "--health-watch", "1", "--quiet"};
  for (const char* word : {"--", "sh", "-c", kCheckpointedRankScript, "nodeloss-rank"})
    args.push_back(word);
  DtrainProcess dtrain(args, dir);
  const std::string job_dir = dir + "/flaky";
  ASSERT_TRUE(WaitForStep(job_dir, 4)) << dtrain.err();
  EXPECT_EQ(dtrain.err().find("link errors"), std::string::npos)
      << "healthy links, counters unchanged: " << dtrain.err();

  // The port goes down and comes back; GPU 5's link replays 500 times; NVLink 7 of GPU 2
  // retrains.
  const std::string node1 = cluster.dir() + "/node1";
  Replace(node1 + "-sys/class/infiniband/mlx5_0/ports/1/counters/link_downed", "1\n");
  Replace(node1 + "-bin/q.txt",
          test::WithField(test::HgxQuery(), 5, "PCI", "Replays Since Reset", "501"));
  Replace(node1 + "-bin/nvlink-errors.txt",
          test::NvlinkErrors(8, 18, {{{2, 7, "Recovery Errors"}, 1}}));
  test::WriteNicAer(node1 + "-sys", "mlx5_0", 40, 0, 0);
  const auto broken = Clock::now();
  double found_s = -1;
  while (Clock::now() - broken < std::chrono::seconds(15) && dtrain.running()) {
    const std::string err = dtrain.err();
    if (err.find("GPU 5 PCIe replays +500") != std::string::npos &&
        err.find("GPU 2 NVLink 7 Recovery Errors +1 (retrained)") != std::string::npos &&
        err.find("mlx5_0/1 link_downed +1 (went down and came back)") != std::string::npos &&
        err.find("mlx5_0 PCIe AER correctable +40") != std::string::npos) {
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
  // Said once (four warnings at most, when rounds read the four faults apart), though the
  // counters stay grown and the watch goes on.
  std::string said;
  int warnings = 0;
  for (const json& e : record["events"]) {
    if (e["kind"] != "health_warning") continue;
    ++warnings;
    said += e["text"].get<std::string>() + "\n";
  }
  EXPECT_GE(warnings, 1) << record["events"].dump(2);
  EXPECT_LE(warnings, 4) << said;
  EXPECT_NE(said.find("GPU 5 PCIe replays +500"), std::string::npos) << said;
  EXPECT_NE(said.find("GPU 2 NVLink 7 Recovery Errors +1"), std::string::npos) << said;
  EXPECT_NE(said.find("mlx5_0/1 link_downed +1"), std::string::npos) << said;
  EXPECT_NE(said.find("mlx5_0 PCIe AER correctable +40"), std::string::npos) << said;
  EXPECT_EQ(said.find("node0"), std::string::npos) << said;

  // `dtrain status` says them too.
  DtrainProcess shown({"status", "--job", "flaky", "--log-dir", dir}, dir);
  EXPECT_EQ(shown.Wait(30), 0) << shown.err();
  EXPECT_NE(shown.out().find("warning: node node1: link errors grew in "), std::string::npos)
      << shown.out();
}

// Ranks count steps from the job's checkpoint to 24, a step every 0.25 s (rank 0 writes a metrics
// line per step). In the first attempt,
// node2's rank stops at step 16 with NCCL's watchdog message: a collective timed out, which names
// no node (every rank of a job whose link is flaky may see it).
const char* kTimeoutOnce = R"sh(
ck=$DTRAIN_LOG_DIR/checkpoint
s=0; [ -f "$ck" ] && s=$(cat "$ck")
mkdir -p "$DTRAIN_LOG_DIR/metrics"
while [ "$s" -lt 24 ]; do
  sleep 0.25; s=$((s + 1))
  if [ "$RANK" = 0 ]; then
    echo "$s" >"$ck.tmp" && mv "$ck.tmp" "$ck"
    echo "{\"step\": $s}" >>"$DTRAIN_LOG_DIR/metrics/rank-0.jsonl"
  fi
  if [ "$DTRAIN_NODE" = node2 ] && [ "$s" = 16 ] && [ ! -f "$DTRAIN_LOG_DIR/timed-out" ]; then
    touch "$DTRAIN_LOG_DIR/timed-out"
    echo "torch.distributed.DistBackendError: [Rank $RANK] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out." >&2
    exit 1
  fi
done
echo "rank $RANK done")sh";

struct FlapRun {
  int status = -1;
  std::string err;
  json record;
};

// Three nodes (and `spares` more) run kTimeoutOnce with the health watch every second and one
// restart; once rank 0 checkpointed step 4, node1's port goes down and comes back.
FlapRun FlapThenTimeOut(const std::string& name, int spares) {
  FlapRun r;
  SshTestCluster cluster(name, 3 + spares, 1);
  if (!cluster.error().empty()) {
    r.err = cluster.error();
    return r;
  }
  const std::string file = HgxNodesWithPort(cluster, 3 + spares);
  const std::string dir = testing::ScratchDirs::Make(name);
  std::vector<std::string> args = {"launch",
                                   "-c",
                                   file,
                                   "--job",
                                   "flap",
                                   "--log-dir",
                                   dir,
                                   "--spares",
                                   std::to_string(spares),
                                   "--max-restarts",
                                   "1",
                                   "--health-watch",
                                   "1",
                                   "--quiet"};
  for (const char* word : {"--", "sh", "-c", kTimeoutOnce, "nodeloss-rank"}) args.push_back(word);
  DtrainProcess dtrain(args, dir);
  const std::string job_dir = dir + "/flap";
  EXPECT_TRUE(WaitForStep(job_dir, 4)) << dtrain.err();
  Replace(cluster.dir() + "/node1-sys/class/infiniband/mlx5_0/ports/1/counters/link_downed", "1\n");
  r.status = dtrain.Wait(60);
  r.err = dtrain.err();
  r.record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  std::printf("%s", r.err.c_str());
  return r;
}

// The timeout names no node, but node1's port flapped during the attempt: the spare takes its
// place, and the restart runs on node0, node2 and node3.
TEST(FlakyLink, FailedAttemptGoesOnWithoutTheNodeWhoseLinkFlapped) {
  const FlapRun r = FlapThenTimeOut("flaky-spare", 1);
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined for the rest of job flap: the health checks "
                       "warned of it during the failed attempt: node node1: link errors grew in "),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  const json& attempts = r.record["attempts"];
  ASSERT_EQ(attempts.size(), 2u) << r.record.dump(2);
  EXPECT_EQ(attempts[0]["cause"], "collective-timeout");
  EXPECT_TRUE(attempts[0]["blamed_node"].is_null()) << attempts[0].dump();
  EXPECT_EQ(attempts[1]["nodes"], json({"node0", "node2", "node3"}));
  EXPECT_NE(r.record["nodes"][1].value("quarantined", "").find("link_downed +1"), std::string::npos)
      << r.record["nodes"].dump(2);
}

// Without a spare the job cannot go on without node1: it keeps it, the warning said.
TEST(FlakyLink, WithoutASpareTheNodeWhoseLinkFlappedRunsAgain) {
  const FlapRun r = FlapThenTimeOut("flaky-nospare", 0);
  if (r.err.find("needs root") != std::string::npos) GTEST_SKIP() << r.err;
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: warning: node node1: link errors grew in "), std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("quarantined"), std::string::npos) << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 2u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][1]["nodes"], json({"node0", "node1", "node2"}));
}

}  // namespace
}  // namespace dtrain
