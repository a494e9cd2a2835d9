// A real Slurm on this machine for the Slurm integration tests (slurm_integration_test):
// tests/slurm/slurm-cluster.sh starts munged, slurmctld and one slurmd (this host, as node1 and
// node2) before the tests and stops them after (SlurmCluster, once for the whole process). When
// Slurm cannot start, the tests fail as root (CI runs as root, where Slurm must work) and are
// skipped, saying why, otherwise (slurmd needs root): SlurmTransportTest, the fixture every test
// of the set derives from.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launcher/slurm/slurm_child.h"
#include "tests/support/test_paths.h"

namespace dtrain::test {

inline const std::string kClusterScript =
    std::string(DTRAIN_SOURCE_DIR) + "/tests/slurm/slurm-cluster.sh";
inline std::string g_start_failure;  // set when the cluster could not start

// Starts the cluster once for the whole set; stops it at the end.
class SlurmCluster : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("DTRAIN_SLURM_DIR", "/tmp/dtrain-slurm-test", 0);
    setenv("DTRAIN_SLURM_PORT", "16837", 0);
    const SlurmCommandResult started = RunSlurmCommand({kClusterScript, "start"}, "", 60000);
    const std::string prefix = "export SLURM_CONF=";
    const size_t at = started.out.find(prefix);
    if (started.status != 0 || at == std::string::npos) {
      g_start_failure = "Slurm could not be started here: " + started.Describe();
      if (geteuid() != 0) {
        std::printf("SLURM UNAVAILABLE: %s\n", g_start_failure.c_str());  // ctest: skipped
      }
      return;
    }
    std::string conf = started.out.substr(at + prefix.size());
    conf = conf.substr(0, conf.find('\n'));
    setenv("SLURM_CONF", conf.c_str(), 1);
    unsetenv("SLURM_JOB_ID");
    unsetenv("SLURM_JOB_NODELIST");
    started_ = true;
  }
  void TearDown() override {
    if (started_) RunSlurmCommand({kClusterScript, "stop"}, "", 60000);
  }

 private:
  bool started_ = false;
};

// `squeue -h ARGS`: what it printed.
inline std::string Squeue(const std::vector<std::string>& args);

class SlurmTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (g_start_failure.empty()) {
      WaitForNoJob();
      return;
    }
    if (geteuid() == 0) FAIL() << g_start_failure;
    GTEST_SKIP() << g_start_failure << " (not root)";
  }

 private:
  // Each test starts with both nodes free: a batch job an earlier test ended may still be
  // completing (CG) on a loaded machine, and would keep this test's job pending (Resources).
  // Waits at most 60 s; says what it waited for.
  static void WaitForNoJob() {
    const auto start = std::chrono::steady_clock::now();
    std::string left = Squeue({"-o", "%i %j %T %N"});
    if (left.empty()) return;
    const std::string first = left;
    while (!left.empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      left = Squeue({"-o", "%i %j %T %N"});
    }
    std::printf("waited %.1f s for Slurm jobs an earlier test left:\n%s%s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                first.c_str(), left.empty() ? "" : ("still there:\n" + left).c_str());
  }
};

// The built dtrain-clip ("" when it was not built).
inline std::string BuiltClip() {
  const std::string clip = std::string(DTRAIN_BINARY_DIR) + "/dtrain-clip";
  return access(clip.c_str(), X_OK) == 0 ? clip : "";
}

// `dtrain launch` arguments that end in dtrain-clip training `samples` Fashion-MNIST samples, one
// epoch of batch 64 on one thread per rank, after `launch` (the options before `--`).
inline std::vector<std::string> LaunchClipArgs(const std::vector<std::string>& launch,
                                               const std::string& clip, int samples) {
  std::vector<std::string> args = {"launch"};
  args.insert(args.end(), launch.begin(), launch.end());
  for (const std::string& word :
       {std::string("--"), clip, std::string("train"), std::string("--dataset-type"),
        std::string("fashion-mnist"), std::string("--train-num-samples"), std::to_string(samples),
        std::string("--epochs"), std::string("1"), std::string("--batch-size"), std::string("64"),
        std::string("--threads"), std::string("1")}) {
    args.push_back(word);
  }
  return args;
}

inline std::string Squeue(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"squeue", "-h"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunSlurmCommand(argv, "", 10000).out;
}

// A batch job of its own holding both nodes (`tasks` per node) for two minutes: its id, or "".
inline std::string HoldNodes(int tasks, const std::string& name) {
  const SlurmCommandResult held = RunSlurmCommand(
      {"sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=" + std::to_string(tasks),
       "--job-name=" + name, "--output=/dev/null", "--wrap=sleep 120"},
      "", 10000);
  EXPECT_EQ(held.status, 0) << held.Describe();
  return held.status == 0 ? held.out.substr(0, held.out.find_first_of(";\n")) : "";
}

// Waits (at most 10 s) until Slurm job `job` runs: its node list, "" when it did not start.
inline std::string WaitUntilRunning(const std::string& job) {
  for (int i = 0; i < 50 && Squeue({"-j", job, "-o", "%T"}).rfind("RUNNING", 0) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (Squeue({"-j", job, "-o", "%T"}).rfind("RUNNING", 0) != 0) return "";
  const std::string nodelist = Squeue({"-j", job, "-o", "%N"});
  return nodelist.substr(0, nodelist.find('\n'));
}

}  // namespace dtrain::test
