// dtrain-clip through `dtrain launch` over ssh on namespace nodes: every rank runs on its node and
// all ranks end with identical parameters, with the flat allreduce and Gloo's default address
// (3 nodes x 1 rank), and with --hierarchical-allreduce and GLOO_SOCKET_IFNAME (2 nodes x 2
// ranks). Needs root; skipped otherwise.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "tests/support/metrics_lines.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/ssh_launch_run.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using test::EndLines;
using test::Field;
using test::LaunchResult;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

const std::string kBin = DTRAIN_BINARY_DIR;

// The cluster file with Gloo bound to each node's bridge interface, written beside it.
std::string ClusterFileWithGloo(const SshTestCluster& cluster) {
  const std::string path = cluster.dir() + "/cluster-gloo.yaml";
  std::ofstream(path) << ReadText(cluster.cluster_file()) << "env: {GLOO_SOCKET_IFNAME: eth0}\n";
  return path;
}

// `dtrain launch` of a short dtrain-clip run; each rank first prints its node's hostname.
LaunchResult LaunchClip(const std::string& cluster_file, const std::string& logs,
                        const std::string& job, const std::string& extra_flags) {
  const std::string clip = kBin + "/dtrain-clip train --batch-size 16 --train-num-samples 384" +
                           " --zeroshot-frequency 0 --save-frequency 0 --threads 1 --max-steps 3" +
                           extra_flags;
  return test::RunLaunch(kBin + "/dtrain launch -q -c " + cluster_file + " --log-dir " + logs +
                         " --job " + job + " -- sh -c 'echo host=$(hostname); exec " + clip + "'");
}

// Every rank's log names node rank/slots and all `ranks` end lines carry one param_hash.
void ExpectSameParametersOnEveryNode(const std::string& logs, const std::string& job, int ranks,
                                     int slots) {
  auto ends = EndLines(logs + "/" + job);
  ASSERT_EQ(ends.size(), static_cast<size_t>(ranks)) << "metrics files under " << logs;
  const std::string hash = Field(ends["rank-0.jsonl"], "param_hash");
  EXPECT_FALSE(hash.empty()) << ends["rank-0.jsonl"];
  for (int rank = 0; rank < ranks; ++rank) {
    const std::string name = "rank-" + std::to_string(rank);
    EXPECT_EQ(Field(ends[name + ".jsonl"], "param_hash"), hash) << name;
    EXPECT_EQ(Field(ends[name + ".jsonl"], "step"), "3") << name;
    const std::string log = ReadText(logs + "/" + job + "/" + name + ".log");
    EXPECT_NE(log.find("host=node" + std::to_string(rank / slots) + "\n"), std::string::npos)
        << name << " log:\n"
        << log;
  }
}

TEST(DistSsh, ThreeNodesEndWithIdenticalParameters) {
  SshTestCluster cluster("dist-3x1", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  const LaunchResult r = LaunchClip(cluster.cluster_file(), logs, "flat", "");
  ASSERT_EQ(r.status, 0) << r.output << "\nsee " << logs;
  ExpectSameParametersOnEveryNode(logs, "flat", 3, 1);
  RecordProperty("launch_seconds", std::to_string(r.seconds));
}

TEST(DistSsh, TwoNodesTwoSlotsHierarchicalAllreduceEndsWithIdenticalParameters) {
  SshTestCluster cluster("dist-2x2", 2, 2);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  const LaunchResult r =
      LaunchClip(ClusterFileWithGloo(cluster), logs, "hier", " --hierarchical-allreduce");
  ASSERT_EQ(r.status, 0) << r.output << "\nsee " << logs;
  ExpectSameParametersOnEveryNode(logs, "hier", 4, 2);
  RecordProperty("launch_seconds", std::to_string(r.seconds));
}

// dtrain-clip launched as the command itself (not through sh): the job's store is
// `dtrain-clip store` on node0, and every rank, rank 0 included, is its client.
TEST(DistSsh, TwoNodesTrainAsClientsOfTheJobsStore) {
  SshTestCluster cluster("dist-store-2x1", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  const std::string out =
      RunOutput(kBin + "/dtrain launch -q -c " + cluster.cluster_file() + " --log-dir " + logs +
                " --job store -- " + kBin +
                "/dtrain-clip train --batch-size 16 --train-num-samples 384 --zeroshot-frequency 0"
                " --save-frequency 0 --threads 1 --max-steps 3 2>&1; echo \"status=$?\"");
  ASSERT_NE(out.find("status=0"), std::string::npos) << out;
  EXPECT_NE(out.find("dtrain: the job's TCPStore on "), std::string::npos) << out;
  EXPECT_NE(out.find("dtrain-clip on node node0)"), std::string::npos) << out;
  const std::string rank0 = ReadText(logs + "/store/rank-0.log");
  EXPECT_EQ(rank0.find("failed to bind"), std::string::npos) << rank0;
  auto ends = EndLines(logs + "/store");
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_EQ(Field(ends["rank-0.jsonl"], "param_hash"), Field(ends["rank-1.jsonl"], "param_hash"));
}

// A dtrain-clip rank on node1 stopped (SIGSTOP) mid-training: the stall watch, probing the nodes
// through ssh, names the rank, its node and the collective the others wait in; --on-stall stop
// ends the job with 124.
TEST(DistSsh, StoppedRankOnANodeIsNamedWithItsNodeAndTheCollective) {
  SshTestCluster cluster("dist-stall-3x1", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  const std::string out = cluster.dir() + "/launch.out";
  const std::string clip = kBin + "/dtrain-clip train --batch-size 16 --dataset-type synthetic" +
                           " --train-num-samples 100000 --max-steps 100000 --zeroshot-frequency 0" +
                           " --save-frequency 0 --threads 1";
  std::thread launch([&] {
    RunOutput(kBin + "/dtrain launch -c " + cluster.cluster_file() + " --log-dir " + logs +
              " --job stall --stall-timeout 6 --on-stall stop -- " + clip + " > " + out +
              " 2>&1; echo $? > " + cluster.dir() + "/status");
  });
  std::string pid;
  for (int i = 0; i < 600 && pid.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto beat = test::HeartbeatFields(logs + "/stall/heartbeat/rank-1.txt");
    if (std::atoll(beat["step"].c_str()) >= 3) pid = beat["pid"];
  }
  ASSERT_FALSE(pid.empty()) << "rank 1 never reached step 3:\n" << ReadText(out);
  ASSERT_EQ(::kill(std::stoi(pid), SIGSTOP), 0);
  launch.join();
  EXPECT_EQ(ReadText(cluster.dir() + "/status"), "124\n") << ReadText(out);
  const std::string report = ReadText(logs + "/stall/stall-1.txt");
  EXPECT_NE(report.find("the job waits for rank 1"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1 on node1 has not entered it"), std::string::npos) << report;
  EXPECT_NE(report.find(" in ALL"), std::string::npos) << report;  // ALLREDUCE or ALLGATHER
}

}  // namespace
}  // namespace dtrain
