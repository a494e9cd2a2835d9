// Stragglers: a dtrain-clip rank whose CPU the kernel throttles (a CPU cgroup with a 10 % quota,
// as a node throttled for heat or power is) keeps the others waiting every step. The straggler
// watch names it, its node and what it costs, on the console and in job.json, while the job
// runs on (three local ranks); with --on-straggler leave on three ssh nodes and --nnodes 2:3,
// its node leaves, is quarantined for the rest of the job, and the job restarts on the other two
// from the step every rank stopped at as it left (no step lost) and finishes, nothing of it left
// on that node. Needs root (a CPU cgroup; network namespaces).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/support/cpu_cgroup.h"
#include "tests/support/metrics_lines.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;
using Clock = std::chrono::steady_clock;

const std::string kBin = DTRAIN_BINARY_DIR;
const std::string kClip = kBin +
                          "/dtrain-clip train --batch-size 16 --dataset-type synthetic"
                          " --zeroshot-frequency 0 --save-frequency 0 --threads 1";

// The pid of rank `rank` once its heartbeat says it took 3 steps and times them ("" if never).
std::string PidAfterThreeSteps(const std::string& heartbeat) {
  for (int i = 0; i < 1200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto beat = test::HeartbeatFields(heartbeat);
    if (std::atoll(beat["step"].c_str()) >= 3 && beat.count("step_s")) return beat["pid"];
  }
  return "";
}

// Seconds from `from` until `path` holds `text`; -1 after `timeout_s`.
double SecondsUntil(const std::string& path, const std::string& text, Clock::time_point from,
                    double timeout_s) {
  while (std::chrono::duration<double>(Clock::now() - from).count() < timeout_s) {
    if (ReadText(path).find(text) != std::string::npos)
      return std::chrono::duration<double>(Clock::now() - from).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return -1;
}

// The first line of `text` that holds `what`.
std::string LineWith(const std::string& text, const std::string& what) {
  const size_t at = text.find(what);
  if (at == std::string::npos) return "";
  const size_t begin = text.rfind('\n', at);
  const size_t end = text.find('\n', at);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end == std::string::npos ? std::string::npos : end - begin - 1);
}

int Status(const std::string& path) {
  const std::string text = ReadText(path);
  return text.empty() ? -1 : std::atoi(text.c_str());
}

TEST(DistStraggler, ThrottledRankIsNamedWhileTheJobRunsOn) {
  const std::string dir = testing::ScratchDirs::Make("dtrain-straggler");
  testing::CpuCgroup slow("dtrain-straggler-local-" + std::to_string(::getpid()), 0.1);
  if (!slow.error().empty()) GTEST_SKIP() << slow.error();
  const std::string out = dir + "/launch.out";
  std::thread launch([&] {
    RunOutput("cd " + dir + " && NPROC_PER_NODE=3 " + kBin + "/dtrain launch --log-dir " + dir +
              "/logs --job slow --stall-timeout 5 --straggler-factor 1.5 -- " + kClip +
              " --train-num-samples 100000 --max-steps 100000 > " + out + " 2>&1; echo $? > " +
              dir + "/status");
  });
  const std::string pid = PidAfterThreeSteps(dir + "/logs/slow/heartbeat/rank-1.txt");
  ASSERT_FALSE(pid.empty()) << "rank 1 never took 3 timed steps:\n" << ReadText(out);
  ASSERT_TRUE(slow.Move(pid));
  const Clock::time_point throttled = Clock::now();
  const double named_s = SecondsUntil(out, "straggler: rank 1 on node", throttled, 120);
  const std::string console = ReadText(out);
  const std::string status =
      RunOutput(kBin + "/dtrain status --log-dir " + dir + "/logs --job slow");
  RunOutput("pkill -INT -f 'dtrain launch --log-dir " + dir + "'");
  launch.join();
  ASSERT_GE(named_s, 0) << console;
  RecordProperty("named_after_s", std::to_string(named_s));
  std::printf("rank 1 throttled to 10%% of a CPU: named a straggler %.1f s later\n", named_s);
  // Not before two windows of kWindowSeconds: named for what it did throttled.
  EXPECT_GE(named_s, 10) << console;
  EXPECT_NE(console.find("dtrain: warning: straggler: rank 1 on node "), std::string::npos)
      << console;
  EXPECT_NE(console.find("they wait "), std::string::npos) << console;
  std::printf("%s\n", LineWith(console, "straggler: ").c_str());
  // dtrain status from another terminal lists it.
  EXPECT_NE(status.find("\nstraggler: rank 1 on node "), std::string::npos) << status;
  // One machine: the job cannot go on without it, and --on-straggler report does not try.
  EXPECT_NE(console.find("the job runs at its pace"), std::string::npos) << console;
  EXPECT_EQ(console.find("straggler: rank 0"), std::string::npos) << console;
  EXPECT_EQ(console.find("straggler: rank 2"), std::string::npos) << console;
  const auto record = nlohmann::json::parse(ReadText(dir + "/logs/slow/job.json"));
  bool event = false;
  for (const auto& e : record["events"]) {
    event = event || (e.value("kind", "") == "straggler" &&
                      e.value("text", "").find("rank 1 on node") != std::string::npos);
  }
  EXPECT_TRUE(event) << record.dump(1);
  // The job ran on until the interrupt.
  EXPECT_EQ(record.value("status", ""), "interrupted") << record.dump(1);
}

TEST(DistStraggler, ThrottledNodeLeavesAndTheJobFinishesWithoutIt) {
  SshTestCluster cluster("straggler-3x1", 3, 1);
  REQUIRE_CLUSTER(cluster);
  testing::CpuCgroup slow("dtrain-straggler-ssh-" + std::to_string(::getpid()), 0.1);
  if (!slow.error().empty()) GTEST_SKIP() << slow.error();
  const std::string logs = cluster.dir() + "/logs";
  const std::string out = cluster.dir() + "/launch.out";
  // The default grace period (10 s): at a tenth of a CPU, node2's rank may take 4-10 s a step, and
  // it needs two steps to reach the one every rank stops at, then its part of the checkpoint.
  // Ended after 10 s, it lost steps in 2 runs of 7; the stop waits two of its steps longer.
  std::thread launch([&] {
    RunOutput(kBin + "/dtrain launch -c " + cluster.cluster_file() + " --log-dir " + logs +
              " --job leave --nnodes 2:3 --stall-timeout 5 --on-straggler leave -- " + kClip +
              " --train-num-samples 100000 --max-steps 150 --save-frequency 1 --resume latest > " +
              out + " 2>&1; echo $? > " + cluster.dir() + "/status");
  });
  const std::string pid = PidAfterThreeSteps(logs + "/leave/heartbeat/rank-2.txt");
  ASSERT_FALSE(pid.empty()) << "rank 2 never took 3 timed steps:\n" << ReadText(out);
  ASSERT_TRUE(slow.Move(pid));
  const Clock::time_point throttled = Clock::now();
  const double left_s = SecondsUntil(out, "without node node2, a straggler", throttled, 120);
  launch.join();
  const std::string console = ReadText(out);
  ASSERT_GE(left_s, 0) << console;
  RecordProperty("left_after_s", std::to_string(left_s));
  std::printf("node2's rank throttled to 10%% of a CPU: it left the job %.1f s later\n", left_s);
  EXPECT_EQ(Status(cluster.dir() + "/status"), 0) << console;
  std::printf("%s\n", LineWith(console, "straggler: ").c_str());
  EXPECT_NE(console.find("dtrain: warning: straggler: rank 2 on node node2: "), std::string::npos)
      << console;
  EXPECT_NE(console.find("node node2 leaves the job (--on-straggler leave); SIGKILL comes "),
            std::string::npos)
      << console;
  EXPECT_NE(console.find(" s after SIGTERM, the grace period and two of its steps"),
            std::string::npos)
      << console;
  EXPECT_NE(console.find("restarts on node0,node1 without node node2"), std::string::npos)
      << console;
  const auto record = nlohmann::json::parse(ReadText(logs + "/leave/job.json"));
  EXPECT_EQ(record.value("status", ""), "succeeded") << record.dump(1);
  ASSERT_EQ(record["attempts"].size(), 2u) << record.dump(1);
  EXPECT_EQ(record["attempts"][0].value("cause", ""), "straggler") << record.dump(1);
  EXPECT_EQ(record["attempts"][1]["nodes"].size(), 2u) << record.dump(1);
  bool quarantined = false;
  for (const auto& node : record["nodes"]) {
    if (node.value("host", "") == "node2")
      quarantined = node.value("quarantined", "").find("a straggler") != std::string::npos;
  }
  EXPECT_TRUE(quarantined) << record.dump(1);
  // Sent SIGTERM as it left, node2's rank and the others stopped after the same step with a
  // checkpoint there (dtrain-clip --save-on-signal), and the restart went on from it: no step
  // trained twice.
  EXPECT_EQ(record["attempts"][0].value("steps_lost", -1), 0) << record.dump(1);
  EXPECT_NE(console.find(", 0 step(s) lost"), std::string::npos) << console;
  // The restart ran to the end on two ranks.
  auto ends = test::EndLines(logs + "/leave");
  EXPECT_EQ(test::Field(ends["rank-0.jsonl"], "step"), "150");
  // Nothing of the job is left on the node that left.
  EXPECT_EQ(cluster.NodeProcessesWith(2, "dtrain-clip"), std::vector<std::string>());
}

}  // namespace
}  // namespace dtrain
