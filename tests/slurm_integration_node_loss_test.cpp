// A Slurm node lost while `dtrain launch` runs on the real Slurm on this machine
// (tests/support/slurm_cluster.h): node2 is frozen as a hung machine is, its slurmd, the
// slurmstepd of the ranks' step and the ranks' process groups stopped with SIGSTOP, so neither
// dtrain nor slurmctld hears from it. dtrain must notice within its node timeout (slurmctld would
// declare it DOWN only after SlurmdTimeout, 300 s), go on without it, and leave nothing of the
// old attempt once the node answers again.
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/slurm/slurm_child.h"
#include "tests/support/checkpointed_rank.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/slurm_cluster.h"

namespace dtrain {
namespace {

using testing::ProcessesWithEnv;
using testing::ProcessState;
using testing::ReadFile;

// One Slurm node stopped as one (SIGSTOP) and thawed (SIGCONT) when the test asks or ends,
// whatever happened in between: the node's slurmd, the slurmstepd of every task there (the
// ranks', the job's store, the batch script) and the tasks' process groups (all their children,
// including those forked while the signal is sent).
class FrozenNode {
 public:
  explicit FrozenNode(const std::string& node) {
    const std::string dir = getenv("DTRAIN_SLURM_DIR") ? getenv("DTRAIN_SLURM_DIR") : "";
    slurmd_ = std::atoi(ReadFile(dir + "/slurmd-" + node + ".pid").c_str());
    for (int pid : ProcessesWithEnv("SLURMD_NODENAME=" + node)) {
      // A process may end between the listing and here (the heartbeat's `sleep` every half
      // second): it has no stat left, and nothing to freeze.
      const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
      const size_t paren = stat.rfind(')');
      const pid_t group = getpgid(pid);
      if (paren == std::string::npos || stat.size() < paren + 4 || group < 0) continue;
      tasks_.push_back(pid);
      groups_.insert(group);
      const int parent = std::atoi(stat.c_str() + paren + 4);
      if (ReadFile("/proc/" + std::to_string(parent) + "/cmdline").rfind("slurmstepd", 0) == 0)
        stepds_.insert(parent);
    }
    Send(SIGSTOP);
    // Those that ended before the signal (gone, or a zombie its stopped parent cannot reap) are
    // not the node's tasks any more.
    tasks_.erase(std::remove_if(tasks_.begin(), tasks_.end(),
                                [](int pid) {
                                  const char state = ProcessState(pid);
                                  return state == 0 || state == 'Z' || state == 'X';
                                }),
                 tasks_.end());
  }
  ~FrozenNode() { Thaw(); }
  void Thaw() {
    if (frozen_) Send(SIGCONT);
    frozen_ = false;
  }
  bool complete() const { return slurmd_ > 0 && !groups_.empty() && !stepds_.empty(); }
  const std::vector<int>& tasks() const { return tasks_; }

 private:
  void Send(int sig) {
    for (int group : groups_) kill(-group, sig);
    for (int pid : stepds_) kill(pid, sig);
    if (slurmd_ > 0) kill(slurmd_, sig);
    frozen_ = sig == SIGSTOP;
  }
  int slurmd_ = 0;
  std::vector<int> tasks_;
  std::set<int> groups_, stepds_;
  bool frozen_ = false;
};

// Whether every pid is a stopped process (state T).
bool AllStopped(const std::vector<int>& pids) {
  for (int pid : pids) {
    if (ProcessState(pid) != 'T') return false;
  }
  return !pids.empty();
}

// Waits (at most 10 s) until Slurm holds no step and no batch job of dtrain's job `job` and no
// process of it runs; what is left then ("" for nothing).
std::string WaitUntilNothingIsLeft(const std::string& job) {
  std::string left = "?";
  for (int i = 0; i < 200 && !left.empty(); ++i) {
    left = test::Squeue({"--steps", "-n", "dtrain-" + job}) +
           test::Squeue({"-n", "dtrain-" + job, "-t", "PD,R,CG"});
    if (!ProcessesWithEnv("DTRAIN_JOB=" + job).empty()) left += "a task of the job\n";
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return left;
}

class DtrainNodeLossOnSlurm : public test::SlurmTransportTest {
 protected:
  void SetUp() override {
    SlurmTransportTest::SetUp();
    if (access(testing::DtrainPath().c_str(), X_OK) != 0) GTEST_SKIP() << "dtrain is not built";
    dir_ = "/tmp/dtrain-slurm-test-lost-" + std::to_string(getpid());
    RunSlurmCommand({"mkdir", "-p", dir_}, "", 10000);
  }
  void TearDown() override {
    if (!dir_.empty()) RunSlurmCommand({"rm", "-rf", dir_}, "", 10000);
  }
  // <dir_>/cluster.yaml: nodes a and b (node1 and node2), a rank each, logs in <dir_>/logs.
  void WriteClusterFile() const {
    std::ofstream(dir_ + "/cluster.yaml")
        << "transport: slurm\nslurm: {time: \"00:05:00\"}\n"
        << "nodes:\n  - {host: a, slots: 1}\n  - {host: b, slots: 1}\n"
        << "log_dir: " << dir_ << "/logs\n";
  }
  std::string dir_;
};

// Ranks on node1 (a) and node2 (b), one each, counting steps from rank 0's checkpoint. node2 is
// frozen at step 4. With --node-timeout 3 dtrain names node b lost about 3 s later (the last
// heartbeat came at most half a second before the freeze), stops rank 0, quarantines b and
// restarts on a alone (--nnodes 1:2) with an overlapping step, though slurmctld still holds the
// old step. The frozen tasks are still there, stopped, when the job has ended; once thawed,
// Slurm ends them and the batch job within seconds.
TEST_F(DtrainNodeLossOnSlurm, FrozenNodeIsLostInSecondsAndTheJobGoesOnWithoutIt) {
  const std::string job = "slurm-lost";
  WriteClusterFile();
  testing::WriteFile(dir_ + "/rank.sh", test::kCheckpointedRankScript);
  testing::DtrainProcess dtrain(
      {"launch", "-c", dir_ + "/cluster.yaml", "--job", job, "--nnodes", "1:2", "--max-restarts",
       "1", "--node-timeout", "3", "--grace-period", "2", "--", "sh", dir_ + "/rank.sh"},
      dir_);
  const std::string job_dir = dir_ + "/logs/" + job;
  ASSERT_TRUE(test::WaitForStep(job_dir, 4)) << dtrain.err();
  FrozenNode node2("node2");
  const auto frozen_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(node2.complete()) << "node2's slurmd, slurmstepd or tasks not found";

  const std::string lost = "dtrain: node b lost: no answer for 3 s, last seen ";
  double said_after_s = -1;
  for (int i = 0; i < 300 && said_after_s < 0; ++i) {
    if (dtrain.err().find(lost) != std::string::npos) {
      said_after_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen_at).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("node b said lost %.2f s after it froze (node timeout 3 s)\n", said_after_s);
  EXPECT_GE(said_after_s, 2.4) << dtrain.err();
  EXPECT_LT(said_after_s, 6) << dtrain.err();

  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  const std::string err = dtrain.err();
  EXPECT_NE(err.find("; its rank(s) 1 went with it; every other rank stopped"), std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node b quarantined in job slurm-lost: node b lost"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: health check before restart: 1 node(s) in "), std::string::npos)
      << err;
  EXPECT_NE(err.find("restart 1 of 1) in 1 s on a; cause: node-lost"), std::string::npos) << err;
  EXPECT_NE(err.find("attempt 2 on a: succeeded"), std::string::npos) << err;
  const std::string log0 = ReadFile(job_dir + "/rank-0.log");
  EXPECT_NE(log0.find("rank 0 of 1 on a starts at step "), std::string::npos) << log0;
  EXPECT_NE(log0.find("rank 0 done"), std::string::npos) << log0;
  EXPECT_EQ(test::CheckpointStep(job_dir), 40);
  EXPECT_EQ(ReadFile(job_dir + "/rank-1.log").find("rank 1 done"), std::string::npos);
  EXPECT_NE(ReadFile(job_dir + "/job.json").find("\"node_timeout_s\": 3.0"), std::string::npos);

  // The lost node's ranks were never killed by anyone: they are frozen, not gone.
  EXPECT_TRUE(AllStopped(node2.tasks()));
  node2.Thaw();
  const auto thawed_at = std::chrono::steady_clock::now();
  const auto since_thaw = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - thawed_at).count();
  };
  double tasks_gone_s = -1;
  std::string left = "?";
  for (int i = 0; i < 200 && !left.empty(); ++i) {
    left = test::Squeue({"--steps", "-n", "dtrain-" + job}) +
           test::Squeue({"-n", "dtrain-" + job, "-t", "PD,R,CG"});
    if (!ProcessesWithEnv("DTRAIN_JOB=" + job).empty()) {
      left += "a task ";
    } else if (tasks_gone_s < 0) {
      tasks_gone_s = since_thaw();
    }
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(left, "") << "10 s after node2 answered again";
  std::printf("node2's tasks gone %.2f s, its step and the batch job %.2f s after it thawed\n",
              tasks_gone_s, since_thaw());

  // The next jobs in the same log dir hold node2 back (--hold-back, a day by default). A job of
  // one node leaves it out of its batch job; Slurm runs it on node1.
  std::ofstream(dir_ + "/one.yaml") << "transport: slurm\nslurm: {time: \"00:05:00\"}\n"
                                    << "nodes:\n  - {host: a, slots: 1}\n"
                                    << "log_dir: " << dir_ << "/logs\n";
  const auto launch = [&](const std::string& file, const std::string& next,
                          std::vector<std::string> more) {
    std::vector<std::string> args = {"launch", "-c", dir_ + "/" + file, "--job", next};
    args.insert(args.end(), more.begin(), more.end());
    for (const char* word : {"--", "sh", "-c", "echo on $SLURMD_NODENAME"}) args.push_back(word);
    testing::DtrainProcess run(args, dir_);
    EXPECT_EQ(run.Wait(60), 0) << run.err();
    return run.err();
  };
  const std::string quarantined = " job slurm-lost quarantined it ";
  std::string said = launch("one.yaml", "next", {});
  EXPECT_NE(
      said.find("dtrain: Slurm node node2 left out of this job (sbatch --exclude):" + quarantined),
      std::string::npos)
      << said;
  EXPECT_NE(ReadFile(dir_ + "/logs/next/sbatch.sh").find("#SBATCH --exclude=node2\n"),
            std::string::npos);
  EXPECT_EQ(ReadFile(dir_ + "/logs/next/rank-0.log"), "on node1\n");
  EXPECT_NE(ReadFile(dir_ + "/logs/next/job.json").find("\"held_back\""), std::string::npos);
  // Both nodes: Slurm refuses the batch job without node2 at once, and it goes in as it is.
  said = launch("cluster.yaml", "both", {});
  EXPECT_NE(said.find("dtrain: Slurm node node2 runs in this job though" + quarantined),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("; Slurm refused the batch job without it"), std::string::npos) << said;
  EXPECT_EQ(ReadFile(dir_ + "/logs/both/sbatch.sh").find("--exclude"), std::string::npos);
  EXPECT_EQ(ReadFile(dir_ + "/logs/both/rank-1.log"), "on node2\n");
  // --hold-back 0: the batch job as the cluster file says, and not a word of node2.
  said = launch("one.yaml", "plain", {"--hold-back", "0"});
  EXPECT_EQ(said.find("Slurm node node2"), std::string::npos) << said;
  EXPECT_EQ(ReadFile(dir_ + "/logs/plain/sbatch.sh").find("--exclude"), std::string::npos);
}

// The same freeze with the health watch every second and --max-restarts 1: once dtrain has gone
// on with node a alone, node2 is thawed; the watch's probes (steps of their own on node2) pass
// two rounds in a row and the job restarts on a and b to take it back.
TEST_F(DtrainNodeLossOnSlurm, FrozenNodeThatAnswersAgainRejoinsTheJob) {
  const std::string job = "slurm-back";
  WriteClusterFile();
  std::string script = test::kCheckpointedRankScript;
  script.replace(script.find("-lt 40"), 6, "-lt 100");  // 25 s: a loss, a restart and a return
  testing::WriteFile(dir_ + "/rank.sh", script);
  testing::DtrainProcess dtrain(
      {"launch", "-c", dir_ + "/cluster.yaml", "--job", job, "--nnodes", "1:2", "--max-restarts",
       "1", "--node-timeout", "3", "--grace-period", "2", "--health-watch", "1", "--", "sh",
       dir_ + "/rank.sh"},
      dir_);
  const std::string job_dir = dir_ + "/logs/" + job;
  ASSERT_TRUE(test::WaitForStep(job_dir, 4)) << dtrain.err();
  {
    FrozenNode node2("node2");
    ASSERT_TRUE(node2.complete()) << "node2's slurmd, slurmstepd or tasks not found";
    for (int i = 0; i < 300 && dtrain.err().find("restarting job slurm-back") == std::string::npos;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }  // thawed
  const auto thawed = std::chrono::steady_clock::now();
  const std::string back =
      "dtrain: node b passed the health checks 2 rounds in a row; job "
      "slurm-back restarts on a,b to take it back";
  double back_s = -1;
  for (int i = 0; i < 600 && back_s < 0; ++i) {
    if (dtrain.err().find(back) != std::string::npos) {
      back_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - thawed).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("node b taken back %.2f s after it thawed\n", back_s);
  ASSERT_EQ(dtrain.Wait(90), 0) << dtrain.err();
  const std::string err = dtrain.err();
  EXPECT_GE(back_s, 0) << err;
  EXPECT_NE(err.find("dtrain:   attempt 3 on a,b: succeeded"), std::string::npos) << err;
  const std::string log1 = ReadFile(job_dir + "/rank-1.log");
  EXPECT_NE(log1.find("--- dtrain: restart to take node b back ---"), std::string::npos) << log1;
  EXPECT_NE(log1.find("rank 1 done"), std::string::npos) << log1;
  EXPECT_EQ(WaitUntilNothingIsLeft(job), "");
}

// dtrain-clip on a and b: the job's store runs on the first node, a, in a step of its own.
// Frozen there, both the ranks' step and the store's lose the node; neither makes dtrain wait for
// Slurm (the store's step, unwatched, kept dtrain waiting 16.5 s in a by-hand run), and the loss,
// not a store failure, is what ends the attempt. The loss is found at the node timeout (the
// attempt's fault_us); it is said once the attempt has ended: rank 1, in a collective with the
// lost rank, ends within its stop window (half a second and two steps' time, longer on a busy
// machine) or at the 2 s grace period, and Slurm then takes its step down.
TEST_F(DtrainNodeLossOnSlurm, FrozenFirstNodeWithTheJobsStoreIsLostInSeconds) {
  const std::string clip = test::BuiltClip();
  if (clip.empty()) GTEST_SKIP() << "dtrain-clip is not built";
  const std::string job = "slurm-store";
  WriteClusterFile();
  testing::DtrainProcess dtrain(test::LaunchClipArgs({"-c", dir_ + "/cluster.yaml", "--job", job,
                                                      "--node-timeout", "3", "--grace-period", "2"},
                                                     clip, 20000),
                                dir_);
  const std::string log0 = dir_ + "/logs/" + job + "/rank-0.log";
  for (int i = 0; i < 1200 && ReadFile(log0).find("step 10/") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(ReadFile(log0).find("step 10/"), std::string::npos) << dtrain.err();
  ASSERT_NE(dtrain.err().find("dtrain: the job's TCPStore on "), std::string::npos);
  FrozenNode node1("node1");
  const auto frozen_at = std::chrono::steady_clock::now();
  const auto frozen_wall = std::chrono::system_clock::now();
  ASSERT_TRUE(node1.complete()) << "node1's slurmd, slurmstepd or tasks not found";
  double said_after_s = -1;
  for (int i = 0; i < 600 && said_after_s < 0; ++i) {
    if (dtrain.err().find("dtrain: node a lost: no answer for 3 s") != std::string::npos) {
      said_after_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen_at).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(dtrain.Wait(60), 0) << dtrain.err();  // no restart was allowed
  const std::string record = ReadFile(dir_ + "/logs/" + job + "/job.json");
  EXPECT_NE(record.find("\"cause\": \"node-lost\""), std::string::npos) << record;
  const nlohmann::json attempt = nlohmann::json::parse(record, nullptr, false)["attempts"][0];
  ASSERT_TRUE(attempt["fault_us"].is_number()) << record;
  const double found_after_s =
      attempt["fault_us"].get<double>() / 1e6 -
      std::chrono::duration<double>(frozen_wall.time_since_epoch()).count();
  std::printf("node a (the store's) found lost %.2f s, said %.2f s after it froze (timeout 3 s)\n",
              found_after_s, said_after_s);
  EXPECT_GE(found_after_s, 2.4) << dtrain.err();
  EXPECT_LT(found_after_s, 5) << dtrain.err();
  EXPECT_GE(said_after_s, found_after_s) << dtrain.err();
  EXPECT_LT(said_after_s, found_after_s + 2 + 5) << dtrain.err();  // the grace period, Slurm
  node1.Thaw();
  EXPECT_EQ(WaitUntilNothingIsLeft(job), "") << "10 s after node1 answered again";

  // A job of one node inside the caller's allocation of both (salloc, sbatch) runs on node2:
  // the allocation's other node comes first, and node1, where node a was lost, is left unused.
  std::ofstream(dir_ + "/one.yaml") << "transport: slurm\nnodes:\n  - {host: a, slots: 1}\n"
                                    << "log_dir: " << dir_ << "/logs\n";
  const std::string outer = test::HoldNodes(1, "outer");
  ASSERT_EQ(test::WaitUntilRunning(outer), "node[1-2]");
  testing::DtrainProcess inside({"launch", "-c", dir_ + "/one.yaml", "--job", "inside", "--", "sh",
                                 "-c", "echo on $SLURMD_NODENAME"},
                                dir_, {"SLURM_JOB_ID=" + outer, "SLURM_JOB_NODELIST=node[1-2]"});
  EXPECT_EQ(inside.Wait(60), 0) << inside.err();
  RunSlurmCommand({"scancel", outer}, "", 10000);
  EXPECT_NE(inside.err().find("dtrain: Slurm node node1 of the allocation left unused: job "
                              "slurm-store quarantined it "),
            std::string::npos)
      << inside.err();
  EXPECT_EQ(ReadFile(dir_ + "/logs/inside/rank-0.log"), "on node2\n");
}

}  // namespace
}  // namespace dtrain
