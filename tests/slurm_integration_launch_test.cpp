// `dtrain launch` on a real Slurm on this machine (tests/support/slurm_cluster.h), with a
// cluster file, as a user runs it: per-rank logs that `dtrain logs` reads, a failing rank,
// the cluster file's own health check failing on one node, a rank the OOM killer ends, Ctrl-C,
// dtrain-clip training on two nodes, a stalled rank named by the rank probe, `dtrain status`
// from another process, and the history's exclusion naming a node Slurm no longer has.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "launcher/job_record.h"
#include "launcher/rank_log.h"
#include "launcher/slurm/slurm_child.h"
#include "launcher/subprocess.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/free_port.h"
#include "tests/support/hanging_torch.h"
#include "tests/support/memory_cgroup.h"
#include "tests/support/shm_segment.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using test::SlurmTransportTest;
using test::Squeue;

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

using testing::ReadFile;

// A fresh folder with a two-node cluster file whose logs land in <folder>/logs.
std::string ClusterFolder(const std::string& name, int slots) {
  const std::string dir = "/tmp/dtrain-slurm-test-" + name + "-" + std::to_string(getpid());
  RunSlurmCommand({"mkdir", "-p", dir}, "", 10000);
  std::ofstream(dir + "/cluster.yaml")
      << "transport: slurm\n"
      << "slurm: {time: \"00:05:00\"}\n"
      << "nodes:\n  - {host: a, slots: " << slots << "}\n  - {host: b, slots: " << slots << "}\n"
      << "log_dir: " << dir << "/logs\n";
  return dir;
}

SlurmCommandResult Dtrain(const std::vector<std::string>& args, int timeout_s = 90) {
  std::vector<std::string> argv = {kDtrain};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunSlurmCommand(argv, "", timeout_s * 1000);
}

// The steps and the pending or running allocation Slurm still shows for the job named `name`,
// after waiting up to 10 s for them to go; "" once every one is gone.
std::string SlurmLeftovers(const std::string& name) {
  std::string left = "?";
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    left = Squeue({"--steps", "-n", name}) + Squeue({"-n", name, "-t", "PD,R"});
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return left;
}

class DtrainLaunchOnSlurm : public SlurmTransportTest {
 protected:
  void SetUp() override {
    SlurmTransportTest::SetUp();
    if (access(kDtrain.c_str(), X_OK) != 0) GTEST_SKIP() << kDtrain << " is not built";
  }
  // The test's folder goes, whether the test passed or not.
  void TearDown() override {
    if (!dir_.empty()) RunSlurmCommand({"rm", "-rf", dir_}, "", 10000);
  }
  std::string Folder(const std::string& name, int slots) {
    return dir_ = ClusterFolder(name, slots);
  }

 private:
  std::string dir_;
};

TEST_F(DtrainLaunchOnSlurm, WritesPerRankLogsThatDtrainLogsReads) {
  const std::string dir = Folder("logs", 1);
  const SlurmCommandResult run =
      Dtrain({"launch", "-c", dir + "/cluster.yaml", "--job", "two", "--", "sh", "-c",
              "echo hello from $RANK of $WORLD_SIZE on $HOROVOD_HOSTNAME via $MASTER_ADDR"});
  ASSERT_EQ(run.status, 0) << run.err;
  // The nodes of the allocation went through the health check (a step on each) before the start.
  EXPECT_NE(run.err.find("dtrain: health check before start: 2 node(s) in "), std::string::npos)
      << run.err;
  EXPECT_EQ(ReadFile(dir + "/logs/two/rank-0.log"), "hello from 0 of 2 on node1 via 127.0.0.1\n");
  EXPECT_EQ(ReadFile(dir + "/logs/two/rank-1.log"), "hello from 1 of 2 on node2 via 127.0.0.1\n");
  EXPECT_NE(ReadFile(dir + "/logs/two/sbatch.sh").find("#SBATCH --nodes=2\n"), std::string::npos);
  const SlurmCommandResult logs =
      Dtrain({"logs", "--log-dir", dir + "/logs", "--job", "two", "--rank", "1"});
  EXPECT_EQ(logs.status, 0) << logs.err;
  EXPECT_NE(logs.out.find("hello from 1 of 2 on node2"), std::string::npos) << logs.out;
}

// A launch's history (--hold-back) names two Slurm nodes that earlier jobs quarantined: node2,
// which Slurm has, and node9, a machine Slurm no longer has (renamed or removed since). sbatch
// refuses an exclusion that names an unknown node whole ("Invalid node name specified"), which
// would leave node2 in too; dtrain asks sinfo first, leaves out node2 alone, says why node9 is
// not left out, and the job of one node runs on node1.
TEST_F(DtrainLaunchOnSlurm, ANodeSlurmNoLongerHasIsNotInTheExclusion) {
  const std::string dir = Folder("gone", 1);
  const int64_t now = WallMicros();
  for (const auto& [job, machine] : {std::pair<std::string, std::string>{"old9", "node9"},
                                     std::pair<std::string, std::string>{"old2", "node2"}}) {
    JobRecord record;
    record.name = job;
    record.status = "succeeded";
    record.transport = "slurm";
    record.started_us = now - 60 * 1000000LL;
    record.ended_us = now - 30 * 1000000LL;
    NodeSpec node;
    node.host = "b";
    node.machine = machine;
    record.nodes.push_back(node);
    record.quarantined["b"] = "node b lost: no answer for 3 s";
    std::filesystem::create_directories(dir + "/logs/" + job);
    WriteJobRecord(dir + "/logs/" + job, record);
  }
  std::ofstream(dir + "/one.yaml") << "transport: slurm\nslurm: {time: \"00:05:00\"}\n"
                                   << "nodes:\n  - {host: a, slots: 1}\n"
                                   << "log_dir: " << dir << "/logs\n";
  const SlurmCommandResult run = Dtrain({"launch", "-c", dir + "/one.yaml", "--job", "next", "--",
                                         "sh", "-c", "echo on $SLURMD_NODENAME"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("dtrain: Slurm node node2 left out of this job (sbatch --exclude): job "
                         "old2 quarantined it "),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("dtrain: Slurm node node9 is not left out of this job: Slurm has no such "
                         "node now (sinfo), though job old9 quarantined it "),
            std::string::npos)
      << run.err;
  EXPECT_NE(ReadFile(dir + "/logs/next/sbatch.sh").find("#SBATCH --exclude=node2\n"),
            std::string::npos)
      << ReadFile(dir + "/logs/next/sbatch.sh");
  EXPECT_EQ(ReadFile(dir + "/logs/next/rank-0.log"), "on node1\n");
}

TEST_F(DtrainLaunchOnSlurm, FailingRankFailsTheJobWithItsStatus) {
  const std::string dir = Folder("fail", 1);
  const SlurmCommandResult run =
      Dtrain({"launch", "-c", dir + "/cluster.yaml", "--job", "bad", "--", "sh", "-c",
              "[ $RANK = 1 ] && { echo giving up >&2; exit 5; }; sleep 30"});
  EXPECT_EQ(run.status, 5) << run.err;
  EXPECT_NE(run.err.find("rank 1"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("exit 5"), std::string::npos) << run.err;
  EXPECT_EQ(ReadFile(dir + "/logs/bad/rank-1.log"), "giving up\n");
  EXPECT_EQ(Squeue({"-n", "dtrain-bad", "-t", "PD,R"}), "");
}

// Rank 1's Python process makes a shared memory segment and is killed outright with its
// resource tracker (its process group SIGKILLed), which leaves the segment in /dev/shm: the task
// wrapper removes it when the task ends and says so in the rank's log.
TEST_F(DtrainLaunchOnSlurm, SegmentOfAProcessKilledOutrightIsRemovedAtTheTasksEnd) {
  const std::string dir = Folder("shm", 1);
  const std::string name = "psm_dtrain_slurm_" + std::to_string(getpid());
  std::ofstream(dir + "/segment.py") << test::kShmSegmentScript;
  const SlurmCommandResult run =
      Dtrain({"launch", "-c", dir + "/cluster.yaml", "--job", "shm", "--", "sh", "-c",
              "[ $RANK = 1 ] || exit 0; exec setsid --wait python3 " + dir + "/segment.py " + name +
                  " 8 kill"});
  EXPECT_EQ(run.status, 137) << run.err;
  const std::string log = ReadFile(dir + "/logs/shm/rank-1.log");
  EXPECT_NE(log.find("made " + name), std::string::npos) << log << run.err;
  EXPECT_NE(log.find("removed 1 shared memory segment(s) that processes killed outright left in "
                     "/dev/shm (8 MiB: " +
                     name + "); no process held them"),
            std::string::npos)
      << log << run.err;
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + name));
  std::filesystem::remove("/dev/shm/" + name);
}

// The cluster file's own health checks run in the probe's step on each node of the allocation,
// with the node's name in the cluster file as DTRAIN_NODE (as its ranks see it) and Slurm's own
// variables: the check fails on node b alone (its scratch marker file is missing), so the check
// before the start finds b (Slurm's node2) unfit, the job (no spare) does not start, and the
// allocation is given back.
TEST_F(DtrainLaunchOnSlurm, ClusterFileHealthCheckRunsOnEachNodeOfTheAllocation) {
  const std::string dir = Folder("site-check", 1);
  RunSlurmCommand({"sh", "-c", "echo ok >" + dir + "/scratch-a"}, "", 10000);
  std::ofstream(dir + "/cluster.yaml", std::ios::app)
      << "health_checks:\n  - {name: scratch, run: 'test -f " << dir
      << "/scratch-$DTRAIN_NODE || { echo \"no scratch on $DTRAIN_NODE ($SLURMD_NODENAME)\"; "
         "exit 1; }'}\n";
  const SlurmCommandResult run = Dtrain(
      {"launch", "-c", dir + "/cluster.yaml", "--job", "site", "--", "sh", "-c", "echo started"});
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_NE(run.err.find("failed the health check before start: node b: health check 'scratch' "
                         "failed (exit 1): no scratch on b (node2)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("health check before start: 2 node(s) in "), std::string::npos);
  EXPECT_EQ(run.err.find("node a: health check"), std::string::npos) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/logs/site/rank-0.log")) << "no rank started";
  EXPECT_EQ(SlurmLeftovers("dtrain-site"), "");
}

// A task the kernel's OOM killer ends (rank 1 moved into a 64 MiB memory cgroup, allocating 400
// MiB): the task wrapper sees the node's OOM kill count go up and says so in the rank's log; the
// job's cause is oom, no node blamed. This Slurm enforces no memory limits of its own.
TEST_F(DtrainLaunchOnSlurm, RankKilledByTheOomKillerIsToldApart) {
  testing::MemoryCgroup cgroup("dtrain-oom-slurm-" + std::to_string(getpid()), 64 << 20);
  REQUIRE_CGROUP(cgroup);
  const std::string dir = Folder("oom", 1);
  const testing::DtrainRun run = cgroup.Run(
      {"launch", "-c", dir + "/cluster.yaml", "--job", "oom", "--grace-period", "2", "--", "sh",
       "-c",
       "if [ $RANK = 1 ]; then " + testing::MemoryCgroup::Overrun(dir) + "; else sleep 30; fi"},
      dir);
  EXPECT_EQ(run.status, 137) << run.err;
  const std::string log = ReadFile(dir + "/logs/oom/rank-1.log");
  EXPECT_NE(log.find("the kernel's OOM killer ran while this rank did (oom_kill "),
            std::string::npos)
      << log << run.err;
  EXPECT_NE(run.err.find("dtrain: note: the kernel's OOM killer ended this rank"),
            std::string::npos)
      << run.err;
  const std::string record = ReadFile(dir + "/logs/oom/job.json");
  EXPECT_NE(record.find("\"cause\": \"oom\""), std::string::npos) << record;
  EXPECT_EQ(Squeue({"-n", "dtrain-oom", "-t", "PD,R"}), "");
}

// `dtrain launch` in `dir` of job `job`, whose two ranks say "ready" and sleep `seconds` (a number
// no other test uses, for pgrep); waits (at most 30 s) until both logs say so, which `ready` tells.
Subprocess StartReadyRanks(const std::string& dir, const std::string& job,
                           const std::string& seconds, bool& ready) {
  SubprocessOptions options;
  options.argv = {kDtrain, "launch",
                  "-c",    dir + "/cluster.yaml",
                  "--job", job,
                  "--",    "sh",
                  "-c",    "echo ready; exec sleep " + seconds};
  options.out = options.err = Stdio::kNull;
  Subprocess dtrain;
  ready = false;
  if (!dtrain.Start(options).empty()) return dtrain;
  const std::string log0 = dir + "/logs/" + job + "/rank-0.log";
  const std::string log1 = dir + "/logs/" + job + "/rank-1.log";
  for (int i = 0; i < 300 && !ready; ++i) {
    ready = ReadFile(log0) == "ready\n" && ReadFile(log1) == "ready\n";
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return dtrain;
}

TEST_F(DtrainLaunchOnSlurm, InterruptLeavesNoStepNoJobAndNoTask) {
  const std::string dir = Folder("int", 1);
  bool ready = false;
  Subprocess dtrain = StartReadyRanks(dir, "stop", "89", ready);
  ASSERT_TRUE(ready);
  dtrain.Signal(SIGINT);  // what Ctrl-C at the terminal sends
  EXPECT_EQ(dtrain.Finish().ShellStatus(), 130);
  EXPECT_EQ(SlurmLeftovers("dtrain-stop"), "");
  EXPECT_NE(system("pgrep -f 'slee[p] 89' >/dev/null"), 0) << "a task outlived the job";
}

// dtrain killed with SIGKILL (the OOM killer of a login node) cannot stop its ranks itself: srun,
// told by the kernel that dtrain is gone (PR_SET_PDEATHSIG), cancels the step, so no rank runs on
// unwatched. The batch job dtrain submitted stays until its idle limit (DTRAIN_SLURM_IDLE_S).
TEST_F(DtrainLaunchOnSlurm, KilledDtrainLeavesNoStepAndNoTask) {
  const std::string dir = Folder("killed", 1);
  bool ready = false;
  Subprocess dtrain = StartReadyRanks(dir, "killed", "87", ready);
  ASSERT_TRUE(ready);
  dtrain.Signal(SIGKILL);
  dtrain.Finish();
  const auto killed = std::chrono::steady_clock::now();
  std::string left = "?";
  for (int i = 0; i < 100 && !left.empty(); ++i) {
    left.clear();
    std::istringstream steps(Squeue({"--steps", "-n", "dtrain-killed"}));
    for (std::string line; std::getline(steps, line);) {
      if (line.find(".batch ") == std::string::npos) left += line + "\n";  // the batch script's
    }
    if (system("pgrep -f 'slee[p] 87' >/dev/null") == 0) left += "a rank ";
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double gone_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  std::printf("dtrain killed: its step and ranks gone after %.2f s\n", gone_s);
  EXPECT_EQ(left, "") << "10 s after dtrain was killed";
  RunSlurmCommand({"scancel", "--name", "dtrain-killed"}, "", 10000);
}

// A short two-rank dtrain-clip run on Fashion-MNIST, ranks on node1 and node2.
TEST_F(DtrainLaunchOnSlurm, TrainsDtrainClipOnTwoNodes) {
  const std::string clip = test::BuiltClip();
  if (clip.empty()) GTEST_SKIP() << "dtrain-clip is not built";
  const std::string dir = Folder("clip", 1);
  std::vector<std::string> args =
      test::LaunchClipArgs({"-c", dir + "/cluster.yaml", "--job", "clip"}, clip, 512);
  args.insert(args.end(), {"--zeroshot-samples", "100"});
  const SlurmCommandResult run = Dtrain(args, 150);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string log0 = ReadFile(dir + "/logs/clip/rank-0.log");
  EXPECT_NE(log0.find("x 2 rank(s)"), std::string::npos) << log0;
  // The job's store is `dtrain-clip store` in a step of its own; rank 0 is only a client.
  EXPECT_NE(run.err.find("dtrain: the job's TCPStore on "), std::string::npos) << run.err;
  EXPECT_EQ(log0.find("failed to bind"), std::string::npos) << log0;
  EXPECT_NE(log0.find("done:"), std::string::npos) << log0;
  EXPECT_NE(ReadFile(dir + "/logs/clip/rank-1.log").find("done:"), std::string::npos);
  EXPECT_NE(ReadFile(dir + "/logs/clip/metrics/rank-0.jsonl").find("\"event\":\"end\""),
            std::string::npos);
}

using test::FreePort;

// Rank 1 of a torch.distributed (Gloo) job sleeps before an all_reduce rank 0 waits in. The
// rank probe runs as steps beside the ranks' step (which holds every CPU of the allocation), so
// the stall is reported soon after the timeout, naming rank 1, its node and its Python frame;
// --on-stall stop ends the job with 124 and leaves no step and no task.
TEST_F(DtrainLaunchOnSlurm, StalledRankIsNamedAndOnStallStopLeavesNothing) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  const std::string dir = Folder("stall", 1);
  testing::WriteFile(dir + "/hang.py", testing::HangingTorchScript(1));
  testing::DtrainProcess dtrain(
      {"launch", "-c", dir + "/cluster.yaml", "--job", "slurm-stall", "--master-port",
       std::to_string(FreePort()), "--stall-timeout", "3", "--on-stall", "stop", "--grace-period",
       "3", "--", testing::kVenvPython, dir + "/hang.py"},
      dir);
  ASSERT_EQ(dtrain.Wait(120), 124) << dtrain.err();
  // Python's start and the rendezvous take a few seconds; the probes none to speak of.
  EXPECT_LT(dtrain.seconds(), 30) << dtrain.err();
  std::printf("stopped %.1f s after launch (stall timeout 3 s)\n", dtrain.seconds());
  const std::string err = dtrain.err();
  // The job's store is dtrain's here too: a step of its own on the first node, beside the ranks.
  EXPECT_NE(err.find("dtrain: the job's TCPStore on "), std::string::npos) << err;
  const std::string report = ReadFile(dir + "/logs/slurm-stall/stall-1.txt");
  EXPECT_EQ(ReadFile(dir + "/logs/slurm-stall/rank-0.log").find("step 3"), std::string::npos);
  EXPECT_NE(report.find("the job waits for rank 1\n"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1 in <module> ("), std::string::npos) << report;
  EXPECT_NE(report.find("hang.py:8) `time.sleep(3600)`"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1 on b (pid "), std::string::npos) << report;
  EXPECT_NE(report.find("Python stack (py-spy)"), std::string::npos) << report;
  EXPECT_EQ(report.find("not probed"), std::string::npos) << report;
  EXPECT_NE(err.find("dtrain: stall: rank"), std::string::npos) << err;
  EXPECT_NE(err.find("dtrain: stall report written to " + dir + "/logs/slurm-stall/stall-1.txt"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("job slurm-stall stopped (--on-stall stop): rank 1 on node b stalled"),
            std::string::npos)
      << err;
  EXPECT_NE(ReadFile(dir + "/logs/slurm-stall/job.json").find("\"exit_code\": 124"),
            std::string::npos);
  EXPECT_EQ(SlurmLeftovers("dtrain-slurm-stall"), "");
  EXPECT_TRUE(testing::ProcessesWithEnv("DTRAIN_JOB=slurm-stall").empty())
      << "a task outlived the job";
  EXPECT_NE(system(("pgrep -f '" + dir + "/[h]ang.py' >/dev/null").c_str()), 0)
      << "a rank outlived the job";
}

// torchrun's worker watchdog (TORCHELASTIC_ENABLE_FILE_TIMER=1) in a Slurm step: each task
// runs its rank under the watchdog, which kills the rank whose step outlives its timer; the
// report names the timer and the line, and no step, task or FIFO is left.
TEST_F(DtrainLaunchOnSlurm, WatchdogTimerKillsAHungRankInAStep) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  const std::string dir = Folder("timer", 1);
  const std::string script = std::string(DTRAIN_SOURCE_DIR) + "/tests/torchrun/timed_steps.py";
  testing::DtrainProcess dtrain(
      {"launch", "-c", dir + "/cluster.yaml", "--job", "slurm-timer", "--master-port",
       std::to_string(FreePort()), "-x", "TORCHELASTIC_ENABLE_FILE_TIMER=1", "-x",
       "TORCHELASTIC_TIMER_FILE=" + dir + "/wd", "--", testing::kVenvPython, script, "2", "1",
       "0.2"},
      dir);
  ASSERT_EQ(dtrain.Wait(120), 137) << dtrain.err();
  const std::string err = dtrain.err();
  EXPECT_NE(err.find("dtrain: root cause: rank 1 on node b at "), std::string::npos) << err;
  EXPECT_NE(err.find("TimerExpired: the watchdog timer 'train_step'"), std::string::npos) << err;
  EXPECT_NE(err.find("at " + script + ":29 "), std::string::npos) << err;
  EXPECT_NE(ReadFile(dir + "/logs/slurm-timer/rank-1.log").find("timer file " + dir + "/wd.rank-1"),
            std::string::npos);
  EXPECT_NE(ReadFile(dir + "/logs/slurm-timer/job.json").find("\"cause\": \"watchdog-timer\""),
            std::string::npos);
  EXPECT_EQ(SlurmLeftovers("dtrain-slurm-timer"), "");
  EXPECT_TRUE(testing::ProcessesWithEnv("DTRAIN_JOB=slurm-timer").empty())
      << "a task outlived the job";
  EXPECT_FALSE(std::filesystem::exists(dir + "/wd.rank-0"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/wd.rank-1"));
}

// `dtrain status` from another process finds the Slurm job in job.json and probes its ranks
// with a step of their job.
// Also: the health watch (every second) probes the nodes beside the ranks' step (srun --overlap)
// while they run, and finds them fit.
TEST_F(DtrainLaunchOnSlurm, StatusProbesTheRanksOfARunningJob) {
  const std::string dir = Folder("status", 1);
  testing::DtrainProcess dtrain(
      {"launch", "-c", dir + "/cluster.yaml", "--job", "st", "--health-watch", "1", "--", "sh",
       "-c", "echo hello from $RANK; exec sleep 79"},
      dir);
  const std::string log0 = dir + "/logs/st/rank-0.log", log1 = dir + "/logs/st/rank-1.log";
  ASSERT_TRUE(
      testing::WaitFor([&] { return !ReadFile(log0).empty() && !ReadFile(log1).empty(); }, 30))
      << dtrain.err();
  const testing::DtrainRun live =
      testing::RunDtrain({"status", "--log-dir", dir + "/logs", "--json"}, dir, {}, 30);
  EXPECT_EQ(live.status, 0) << live.err;
  for (const char* expected :
       {"\"status\": \"running\"", "\"transport\": \"slurm\"", "\"node_errors\": {}",
        "\"node\": \"b\"", "\"last_line\": \"hello from 1\""}) {
    EXPECT_NE(live.out.find(expected), std::string::npos) << expected << " in " << live.out;
  }
  EXPECT_EQ(live.out.find("\"pid\": null"), std::string::npos) << live.out;
  EXPECT_EQ(live.out.find("not found"), std::string::npos) << live.out;
  const std::string sleeping = "\"state\": \"sleeping\"";  // both ranks
  const size_t first = live.out.find(sleeping);
  EXPECT_NE(first, std::string::npos) << live.out;
  EXPECT_NE(live.out.find(sleeping, first + 1), std::string::npos) << live.out;
  std::this_thread::sleep_for(std::chrono::seconds(3));  // a few rounds of the health watch
  dtrain.Signal(SIGINT);
  EXPECT_EQ(dtrain.Wait(60), 130) << dtrain.err();
  const std::string record = ReadFile(dir + "/logs/st/job.json");
  const size_t watch = record.find("health watch: ");
  ASSERT_NE(watch, std::string::npos) << record;
  EXPECT_GE(std::atoi(record.c_str() + watch + 14), 1) << record.substr(watch, 80);
  EXPECT_NE(record.find("every 1 s on 2 node(s), all fit", watch), std::string::npos)
      << record.substr(watch, 80);
  const testing::DtrainRun ended =
      testing::RunDtrain({"status", "--log-dir", dir + "/logs", "--job", "st"}, dir, {}, 30);
  EXPECT_EQ(ended.status, 0) << ended.err;
  EXPECT_NE(ended.out.find("job st: interrupted"), std::string::npos) << ended.out;
}

}  // namespace
}  // namespace dtrain
