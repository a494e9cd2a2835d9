// `dtrain launch` with the local transport, run for real: the built dtrain binary starting real
// rank processes. Checks the environment of every rank, failure and interrupt handling (no
// process left behind, other jobs untouched), log completeness and restarts.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/dtrain_process.h"
#include "tests/support/shm_segment.h"

namespace dtrain {
namespace {

using testing::DtrainProcess;
using testing::DtrainRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ProcessesWithEnv;
using testing::ReadFile;
using testing::RunDtrain;
using testing::TempDir;
using testing::WaitFor;
using testing::WriteFile;

// NAME=value pairs of an `env -0` dump.
std::map<std::string, std::string> ParseEnvDump(const std::string& dump) {
  std::map<std::string, std::string> env;
  size_t start = 0;
  while (start < dump.size()) {
    size_t end = dump.find('\0', start);
    if (end == std::string::npos) end = dump.size();
    std::string entry = dump.substr(start, end - start);
    size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    start = end + 1;
  }
  return env;
}

// A job name no other test process uses, so scans for DTRAIN_JOB=<name> count only this job.
std::string Unique(const std::string& name) {
  return name + "-" + std::to_string(::getpid());
}

std::string JobDir(const TempDir& dir, const std::string& job) {
  return dir.path() + "/dtrain-logs/" + job;
}

// Waits until rank-R.log of each of `ranks` ranks of `job` reads "up\n".
bool AllRanksUp(const TempDir& dir, const std::string& job, int ranks) {
  return WaitFor(
      [&] {
        for (int r = 0; r < ranks; ++r) {
          if (ReadFile(JobDir(dir, job) + "/rank-" + std::to_string(r) + ".log") != "up\n") {
            return false;
          }
        }
        return true;
      },
      20);
}

TEST(LocalLaunch, EveryRankSeesItsEnvironment) {
  TempDir dir;
  WriteFile(dir.path() + "/cluster.yaml", R"(transport: local
nodes:
  - host: box
    slots: 4
    gpus: [3, 2, 1, 0]
    env: {NODE_ONLY: "n", SHARED: node}
rendezvous: {port: 29611}
env:
  SHARED: global
  TRICKY: "a b $HOME 'q' \"d\" ;|&`x` \\ *"
)");
  auto run = RunDtrain({"launch", "--job", "envjob", "--", "env", "-0"}, dir.path(),
                       {"OMP_NUM_THREADS_UNSET=1"});
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string job_dir = JobDir(dir, "envjob");
  for (int r = 0; r < 4; ++r) {
    auto env = ParseEnvDump(ReadFile(job_dir + "/rank-" + std::to_string(r) + ".log"));
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(env["WORLD_SIZE"], "4");
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(env["NODE_RANK"], "0");
    EXPECT_EQ(env["MASTER_ADDR"], "box");
    EXPECT_EQ(env["MASTER_PORT"], "29611");
    EXPECT_EQ(env["HOROVOD_RANK"], std::to_string(r));
    EXPECT_EQ(env["HOROVOD_SIZE"], "4");
    EXPECT_EQ(env["HOROVOD_LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(env["HOROVOD_LOCAL_SIZE"], "4");
    EXPECT_EQ(env["HOROVOD_CROSS_RANK"], "0");
    EXPECT_EQ(env["HOROVOD_CROSS_SIZE"], "1");
    EXPECT_EQ(env["HOROVOD_HOSTNAME"], "box");
    EXPECT_EQ(env["NPROC_PER_NODE"], "4");
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], std::to_string(3 - r));
    EXPECT_FALSE(env["OMP_NUM_THREADS"].empty());
    EXPECT_EQ(env["PYTHONUNBUFFERED"], "1");
    EXPECT_EQ(env["PYTHONPATH"].substr(0, dir.path().size()), dir.path());
    EXPECT_EQ(env["DTRAIN_JOB"], "envjob");
    EXPECT_EQ(env["DTRAIN_LOG_DIR"], job_dir);
    EXPECT_EQ(env["DTRAIN_RESTART_COUNT"], "0");
    EXPECT_EQ(env.count("DTRAIN_TIMELINE"), 0u);
    EXPECT_EQ(env["SHARED"], "node");
    EXPECT_EQ(env["NODE_ONLY"], "n");
    EXPECT_EQ(env["TRICKY"], "a b $HOME 'q' \"d\" ;|&`x` \\ *");  // byte for byte, no shell
  }
  // The console shows the ranks' lines with [node:rank] prefixes.
  EXPECT_THAT(run.out, HasSubstr("[box:3] "));
  std::string record = ReadFile(job_dir + "/job.json");
  EXPECT_THAT(record, HasSubstr("\"status\": \"succeeded\""));
  EXPECT_THAT(record, HasSubstr("\"world_size\": 4"));
  char target[256] = {0};
  ASSERT_GT(::readlink((dir.path() + "/dtrain-logs/latest").c_str(), target, sizeof(target) - 1),
            0);
  EXPECT_STREQ(target, "envjob");
}

TEST(LocalLaunch, OmpThreadsAndTimelineVariables) {
  TempDir dir;
  auto run =
      RunDtrain({"launch", "--nproc-per-node", "2", "--timeline", "--job", "t", "--", "env", "-0"},
                dir.path(), {"OMP_NUM_THREADS=3"});
  ASSERT_EQ(run.status, 0) << run.err;
  auto env = ParseEnvDump(ReadFile(JobDir(dir, "t") + "/rank-1.log"));
  EXPECT_EQ(env["OMP_NUM_THREADS"], "3");  // set before: kept
  EXPECT_EQ(env["DTRAIN_TIMELINE"], JobDir(dir, "t") + "/timeline/rank-1.json");
  EXPECT_EQ(env["HOROVOD_TIMELINE"], env["DTRAIN_TIMELINE"]);
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
}

TEST(LocalLaunch, PythonPathIsKeptAndExtended) {
  TempDir dir;
  const char* script = "import os, sys; print(os.environ['PYTHONPATH']); print(sys.path[1])";
  auto run = RunDtrain({"launch", "--job", "p", "--quiet", "--", "python3", "-c", script},
                       dir.path(), {"PYTHONPATH=/old/one:/old/two"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(ReadFile(JobDir(dir, "p") + "/rank-0.log"),
            dir.path() + ":/old/one:/old/two\n" + dir.path() + "\n");

  WriteFile(dir.path() + "/cluster.yaml",
            "transport: local\nnodes: [{host: localhost}]\nworkdir: /tmp\n");
  run = RunDtrain({"launch", "--job", "w", "--quiet", "--", "python3", "-c", script}, dir.path(),
                  {"PYTHONPATH=/old/one"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(ReadFile(JobDir(dir, "w") + "/rank-0.log"), "/tmp:/old/one\n/tmp\n");
}

TEST(LocalLaunch, FailingRankStopsTheJobWithItsStatus) {
  TempDir dir;
  // Rank 1 fails; rank 0 ignores SIGTERM (so only SIGKILL after the grace period ends it),
  // rank 2 stops on SIGTERM.
  const char* script =
      "case $RANK in 1) sleep 0.3; echo rank one gives up; exit 7;; 0) trap '' TERM;; esac; "
      "echo up; sleep 1000 & wait; sleep 1000";
  auto run = RunDtrain({"launch", "--nproc-per-node", "3", "--job", Unique("f"), "--grace-period",
                        "1", "--", "sh", "-c", script},
                       dir.path(), {}, 30);
  EXPECT_EQ(run.status, 7) << run.err;
  EXPECT_GE(run.seconds, 1.2);  // waited the grace period for rank 0
  EXPECT_LT(run.seconds, 5.0);
  EXPECT_THAT(run.err, HasSubstr("rank 1 on node localhost failed: exit 7"));
  EXPECT_THAT(run.err, HasSubstr("[localhost:1] rank one gives up"));
  EXPECT_TRUE(ProcessesWithEnv("DTRAIN_JOB=" + Unique("f")).empty());
  std::string record = ReadFile(JobDir(dir, Unique("f")) + "/job.json");
  EXPECT_THAT(record, HasSubstr("\"status\": \"failed\""));
  EXPECT_THAT(record, HasSubstr("\"failed_rank\": 1"));
  EXPECT_THAT(record, HasSubstr("\"exit_code\": 7"));
  EXPECT_THAT(record, HasSubstr("killed by SIGKILL"));
}

TEST(LocalLaunch, CommandNotFoundIsReported) {
  TempDir dir;
  auto run = RunDtrain({"launch", "--job", "nf", "--", "no-such-program-xyz"}, dir.path());
  EXPECT_EQ(run.status, 127);
  EXPECT_THAT(run.err, HasSubstr("'no-such-program-xyz': command not found"));
  EXPECT_THAT(ReadFile(JobDir(dir, "nf") + "/rank-0.log"), HasSubstr("command not found"));
  // Ranks started after the one that could not start are stopped at once, not after the grace.
  testing::WriteFile(dir.path() + "/mixed.yaml",
                     "transport: local\nnodes: [{host: a, env: {PATH: /nonexistent}}, "
                     "{host: b, slots: 2}]\n");
  run = RunDtrain({"launch", "-c", "mixed.yaml", "--job", "mixed", "--grace-period", "30", "--",
                   "sleep", "100"},
                  dir.path());
  EXPECT_EQ(run.status, 127);
  EXPECT_LT(run.seconds, 10);
  EXPECT_THAT(run.err, HasSubstr("rank 0 on node a failed: could not start"));
  EXPECT_THAT(ReadFile(JobDir(dir, "mixed") + "/job.json"), HasSubstr("killed by SIGTERM"));
}

TEST(LocalLaunch, SigintLeavesNoProcessBehindAndSparesOtherJobs) {
  TempDir dir;
  // Each rank leaves children in its process group, as real training jobs do (data workers).
  const char* script = "sleep 1000 & sleep 1000 & echo up; wait";
  DtrainProcess other({"launch", "--nproc-per-node", "2", "--job", Unique("other"), "--quiet", "--",
                       "sh", "-c", script},
                      dir.path());
  DtrainProcess job({"launch", "--nproc-per-node", "3", "--job", Unique("victim"), "--quiet",
                     "--grace-period", "2", "--", "sh", "-c", script},
                    dir.path());
  ASSERT_TRUE(AllRanksUp(dir, Unique("victim"), 3));
  ASSERT_TRUE(AllRanksUp(dir, Unique("other"), 2));
  EXPECT_EQ(ProcessesWithEnv("DTRAIN_JOB=" + Unique("victim")).size(), 9u);  // 3 x (sh + 2 sleeps)
  const size_t other_count = ProcessesWithEnv("DTRAIN_JOB=" + Unique("other")).size();
  EXPECT_EQ(other_count, 6u);

  job.Signal(SIGINT);
  EXPECT_EQ(job.Wait(20), 130);
  EXPECT_LT(job.seconds(), 60);
  EXPECT_THAT(job.err(), HasSubstr("interrupted by SIGINT"));
  EXPECT_TRUE(ProcessesWithEnv("DTRAIN_JOB=" + Unique("victim")).empty());
  EXPECT_THAT(ReadFile(JobDir(dir, Unique("victim")) + "/job.json"),
              HasSubstr("\"status\": \"interrupted\""));

  // The other job on the same machine is untouched, and stops on its own SIGTERM.
  EXPECT_EQ(ProcessesWithEnv("DTRAIN_JOB=" + Unique("other")).size(), other_count);
  EXPECT_EQ(::kill(other.pid(), 0), 0);
  other.Signal(SIGTERM);
  EXPECT_EQ(other.Wait(20), 128 + SIGTERM);
  EXPECT_TRUE(ProcessesWithEnv("DTRAIN_JOB=" + Unique("other")).empty());
}

// dtrain itself killed outright (SIGKILL, the OOM killer): nothing of the job may live on, not
// even the children the ranks started (data workers holding GPUs), which the kernel does not
// stop when their parent dies.
TEST(LocalLaunch, KillingDtrainLeavesNoProcessBehind) {
  TempDir dir;
  DtrainProcess job({"launch", "--nproc-per-node", "2", "--job", Unique("killed"), "--quiet", "--",
                     "sh", "-c", "sleep 1000 & sleep 1000 & echo up; wait"},
                    dir.path());
  ASSERT_TRUE(AllRanksUp(dir, Unique("killed"), 2));
  // 2 x (sh + 2 sleeps); a sleep that is still between fork and exec may not be counted yet.
  EXPECT_TRUE(
      WaitFor([&] { return ProcessesWithEnv("DTRAIN_JOB=" + Unique("killed")).size() == 6u; }, 10))
      << ProcessesWithEnv("DTRAIN_JOB=" + Unique("killed")).size() << " processes";
  job.Signal(SIGKILL);
  EXPECT_EQ(job.Wait(10), 128 + SIGKILL);
  EXPECT_TRUE(
      WaitFor([&] { return ProcessesWithEnv("DTRAIN_JOB=" + Unique("killed")).empty(); }, 10))
      << ProcessesWithEnv("DTRAIN_JOB=" + Unique("killed")).size() << " processes left";
  for (int pid : ProcessesWithEnv("DTRAIN_JOB=" + Unique("killed"))) ::kill(pid, SIGKILL);
}

// A rank's child that left the rank's process group and session (setsid, as daemons do) dies with
// dtrain too: the guard is the subreaper of everything the rank starts.
TEST(LocalLaunch, KillingDtrainEndsChildrenThatCalledSetsid) {
  TempDir dir;
  const std::string name = Unique("escaped");
  DtrainProcess job(
      {"launch", "--job", name, "--quiet", "--", "sh", "-c", "setsid sleep 1000 & echo up; wait"},
      dir.path());
  ASSERT_TRUE(AllRanksUp(dir, name, 1));
  ASSERT_TRUE(WaitFor([&] { return ProcessesWithEnv("DTRAIN_JOB=" + name).size() == 2u; }, 10));
  job.Signal(SIGKILL);
  EXPECT_EQ(job.Wait(10), 128 + SIGKILL);
  EXPECT_TRUE(WaitFor([&] { return ProcessesWithEnv("DTRAIN_JOB=" + name).empty(); }, 10))
      << ProcessesWithEnv("DTRAIN_JOB=" + name).size() << " processes left";
  for (int pid : ProcessesWithEnv("DTRAIN_JOB=" + name)) ::kill(pid, SIGKILL);
}

// A 2-rank job torn down because rank 1 fails (exit 3) once rank 0 ran `rank0`, which writes a
// pid to the file PIDFILE stands for; rank 0 then waits. Returns the run; `left` gets how
// many live processes of the job remain after up to 5 s (they are killed then), `pid` the pid
// written.
DtrainRun FailAfterRankZero(const std::string& name, const std::string& rank0,
                            const std::vector<std::string>& options, size_t& left,
                            int* pid = nullptr) {
  TempDir dir;
  const std::string pidfile = dir.path() + "/rank0.pid";
  std::vector<std::string> args = {"launch", "--nproc-per-node", "2", "--job", name, "--quiet"};
  args.insert(args.end(), options.begin(), options.end());
  std::string command = rank0;
  command.replace(command.find("PIDFILE"), 7, pidfile);
  args.insert(args.end(), {"--", "sh", "-c",
                           "if [ $RANK = 0 ]; then " + command +
                               "; while :; do sleep 0.1; done; else while [ ! -s " + pidfile +
                               " ]; do sleep 0.05; done; sleep 0.2; exit 3; fi"});
  const DtrainRun run = RunDtrain(args, dir.path());
  EXPECT_FALSE(ReadFile(pidfile).empty()) << run.err;
  if (pid) *pid = std::atoi(ReadFile(pidfile).c_str());
  // Gone, not a zombie: no live process of the job is left.
  WaitFor([&] { return ProcessesWithEnv("DTRAIN_JOB=" + name).empty(); }, 5);
  left = ProcessesWithEnv("DTRAIN_JOB=" + name).size();
  for (int p : ProcessesWithEnv("DTRAIN_JOB=" + name)) ::kill(p, SIGKILL);
  return run;
}

// When another rank fails, a rank's child that called setsid goes with the torn-down rank:
// the guard kills what the rank leaves running before it reports the rank's end.
TEST(LocalLaunch, TeardownEndsChildrenThatCalledSetsid) {
  size_t left = 0;
  const DtrainRun run = FailAfterRankZero(Unique("teardown-setsid"),
                                          "setsid sleep 1000 & echo $! > PIDFILE", {}, left);
  EXPECT_EQ(run.status, 3) << run.err;
  EXPECT_EQ(left, 0u) << "the setsid'd sleep outlived the job";
}

// A rank that ignores SIGTERM is SIGKILLed with its whole group after the grace period, its
// guard included; its setsid'd child is then handed to dtrain, which kills it.
TEST(LocalLaunch, SetsidChildOfARankKilledAfterTheGracePeriodEndsToo) {
  size_t left = 0;
  const DtrainRun run = FailAfterRankZero(Unique("grace-setsid"),
                                          "trap '' TERM; setsid sleep 1000 & echo $! > PIDFILE",
                                          {"--grace-period", "1"}, left);
  EXPECT_EQ(run.status, 3) << run.err;
  EXPECT_EQ(left, 0u) << "the setsid'd sleep outlived the job";
}

// A rank that ignores SIGTERM is SIGKILLed after the grace period with its whole group, Python's
// resource tracker included, which would have removed the rank's shared memory segment: the
// segment is left in /dev/shm, and dtrain removes it once the ranks are gone.
TEST(LocalLaunch, SharedMemoryOfARankKilledAfterTheGracePeriodIsRemoved) {
  TempDir dir;
  const std::string name = "psm_dtrain_local_" + std::to_string(::getpid());
  WriteFile(dir.path() + "/segment.py", test::kShmSegmentScript);
  const DtrainRun run = RunDtrain(
      {"launch", "--nproc-per-node", "2", "--job", Unique("shm"), "--grace-period", "1", "--", "sh",
       "-c",
       "if [ $RANK = 0 ]; then exec python3 " + dir.path() + "/segment.py " + name +
           " 4 ignore-term; fi; while [ ! -e /dev/shm/" + name + " ]; do sleep 0.05; done; exit 3"},
      dir.path(), {}, 30);
  EXPECT_EQ(run.status, 3) << run.err;
  EXPECT_THAT(run.err, HasSubstr("removed 1 shared memory segment(s) that processes killed "
                                 "outright left in /dev/shm (4 MiB: " +
                                 name + "); no process held them"));
  EXPECT_FALSE(std::filesystem::exists("/dev/shm/" + name));
  std::filesystem::remove("/dev/shm/" + name);
}

// The same child started with an environment of its own (`env -i`, or Python's
// subprocess.Popen(env=..., start_new_session=True)): nothing marks it as the job's, but it is
// still handed to dtrain, which kills every process it was handed before it exits.
TEST(LocalLaunch, SetsidChildWithAnEnvironmentOfItsOwnEndsToo) {
  size_t left = 0;
  int pid = 0;
  const DtrainRun run = FailAfterRankZero(
      Unique("grace-setsid-env"), "trap '' TERM; setsid env -i sleep 1000 & echo $! > PIDFILE",
      {"--grace-period", "1"}, left, &pid);
  EXPECT_EQ(run.status, 3) << run.err;
  ASSERT_GT(pid, 1) << run.err;
  auto alive = [pid] {
    const char state = testing::ProcessState(pid);
    return state != 0 && state != 'Z';
  };
  EXPECT_TRUE(WaitFor([&] { return !alive(); }, 5))
      << "the setsid'd sleep with its own environment outlived the job: "
      << ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
  if (alive()) ::kill(pid, SIGKILL);
}

// A stopped rank (SIGSTOP, Ctrl-Z) hears the teardown's SIGTERM at once: it is continued, not
// left for the SIGKILL at the end of the grace period.
TEST(LocalLaunch, StoppedRankEndsWithoutWaitingForTheGracePeriod) {
  size_t left = 0;
  const DtrainRun run = FailAfterRankZero(Unique("stopped"), "echo $$ > PIDFILE; kill -STOP $$",
                                          {"--grace-period", "30"}, left);
  EXPECT_EQ(run.status, 3) << run.err;
  EXPECT_LT(run.seconds, 10) << "the stopped rank waited for --grace-period 30";
  EXPECT_EQ(left, 0u);
}

TEST(LocalLaunch, SecondInterruptKillsAtOnce) {
  TempDir dir;
  DtrainProcess job({"launch", "--nproc-per-node", "2", "--job", Unique("stubborn"), "--quiet",
                     "--grace-period", "60", "--", "sh", "-c", "trap '' TERM; echo up; sleep 1000"},
                    dir.path());
  ASSERT_TRUE(AllRanksUp(dir, Unique("stubborn"), 2));
  job.Signal(SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(::kill(job.pid(), 0), 0);  // still in its grace period: the ranks ignore SIGTERM
  job.Signal(SIGINT);
  EXPECT_EQ(job.Wait(10), 130);
  EXPECT_LT(job.seconds(), 10);
  EXPECT_EQ(job.out(), "");  // --quiet
  EXPECT_TRUE(ProcessesWithEnv("DTRAIN_JOB=" + Unique("stubborn")).empty());
}

TEST(LocalLaunch, FailingJobSparesAnotherJob) {
  TempDir dir;
  DtrainProcess other(
      {"launch", "--job", Unique("bystander"), "--quiet", "--", "sh", "-c", "echo up; sleep 1000"},
      dir.path());
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(JobDir(dir, Unique("bystander")) + "/rank-0.log") == "up\n"; }, 20));
  auto run = RunDtrain({"launch", "--nproc-per-node", "2", "--job", "crash", "--grace-period", "1",
                        "--", "sh", "-c", "[ $RANK = 0 ] && exit 3; sleep 1000"},
                       dir.path());
  EXPECT_EQ(run.status, 3);
  EXPECT_EQ(ProcessesWithEnv("DTRAIN_JOB=" + Unique("bystander")).size(), 2u);
  other.Signal(SIGTERM);
  EXPECT_EQ(other.Wait(20), 128 + SIGTERM);
}

TEST(LocalLaunch, CrashingRankKeepsEveryLineItWrote) {
  TempDir dir;
  auto run = RunDtrain(
      {"launch", "--job", "big", "--nproc-per-node", "2", "--ranks-filter", "1", "--", "sh", "-c",
       "ulimit -c 0; if [ $RANK = 0 ]; then seq 1 100000; kill -SEGV $$; fi; "
       "sleep 1000"},
      dir.path(), {}, 60);
  EXPECT_EQ(run.status, 128 + SIGSEGV);
  std::string expected;
  for (int i = 1; i <= 100000; ++i) expected += std::to_string(i) + "\n";
  const std::string log = ReadFile(JobDir(dir, "big") + "/rank-0.log");
  EXPECT_EQ(log.size(), expected.size());
  EXPECT_TRUE(log == expected) << "rank-0.log differs from the 100000 lines written";
  EXPECT_THAT(run.err, HasSubstr("rank 0 on node localhost failed: killed by SIGSEGV"));
  EXPECT_THAT(run.err, HasSubstr("[localhost:0] 100000\n"));
  // --ranks-filter kept rank 0 off the console, not out of its log.
  EXPECT_THAT(run.out, Not(HasSubstr("[localhost:0]")));
}

TEST(LocalLaunch, MaxRestartsRestartsTheWholeJob) {
  TempDir dir;
  const char* script = "echo try $DTRAIN_RESTART_COUNT; [ $DTRAIN_RESTART_COUNT -ge 2 ] || exit 5";
  auto run = RunDtrain({"launch", "--job", "r", "--max-restarts", "3", "--", "sh", "-c", script},
                       dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(ReadFile(JobDir(dir, "r") + "/rank-0.log"),
            "try 0\n--- dtrain: restart 1 of 3 ---\ntry 1\n--- dtrain: restart 2 of 3 ---\ntry 2\n");
  EXPECT_THAT(run.err, HasSubstr("restarting job r (restart 2 of 3)"));
  // The failure report quotes the failed attempt only.
  EXPECT_THAT(run.err, HasSubstr("last 1 lines of"));
  EXPECT_THAT(run.err, HasSubstr("[localhost:0] try 1\n"));
  std::string record = ReadFile(JobDir(dir, "r") + "/job.json");
  EXPECT_THAT(record, HasSubstr("\"restarts\": 2"));

  run = RunDtrain({"launch", "--job", "r2", "--max-restarts", "1", "--", "sh", "-c", script},
                  dir.path());
  EXPECT_EQ(run.status, 5);
  EXPECT_EQ(ReadFile(JobDir(dir, "r2") + "/rank-0.log"), "try 0\n--- dtrain: restart 1 of 1 ---\ntry 1\n");
}

TEST(LocalLaunch, UsageAndClusterFileErrorsExitTwo) {
  TempDir dir;
  WriteFile(dir.path() + "/bad.yaml", "transport: local\nnodes:\n  - host: a\n    slots: 0\n");
  auto run = RunDtrain({"launch", "-c", "bad.yaml", "--", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("bad.yaml:4:12: nodes[0].slots"));
  run = RunDtrain({"launch", "--job", "../escape", "--", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  run = RunDtrain({"launch", "--no-such-flag"}, dir.path());
  EXPECT_EQ(run.status, 2);
  ASSERT_EQ(RunDtrain({"launch", "--job", "dup", "--", "true"}, dir.path()).status, 0);
  run = RunDtrain({"launch", "--job", "dup", "--", "true"}, dir.path());
  EXPECT_EQ(run.status, 2);
  EXPECT_THAT(run.err, HasSubstr("exists already"));
}

TEST(Init, WritesTemplatesAndRefusesToOverwrite) {
  TempDir dir;
  auto run = RunDtrain({"init", "--template", "ssh", "-o", "c.yaml"}, dir.path());
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(ReadFile(dir.path() + "/c.yaml"), HasSubstr("transport: ssh"));
  WriteFile(dir.path() + "/c.yaml", "mine\n");
  run = RunDtrain({"init", "-o", "c.yaml"}, dir.path());
  EXPECT_NE(run.status, 0);
  EXPECT_THAT(run.err, HasSubstr("already exists"));
  EXPECT_EQ(ReadFile(dir.path() + "/c.yaml"), "mine\n");
  EXPECT_EQ(RunDtrain({"init", "-o", "c.yaml", "--force"}, dir.path()).status, 0);
  EXPECT_THAT(ReadFile(dir.path() + "/c.yaml"), HasSubstr("transport: local"));
  EXPECT_EQ(RunDtrain({"init", "--template", "pbs"}, dir.path()).status, 2);
  // The local template runs as written.
  run = RunDtrain({"launch", "-c", "c.yaml", "--job", "tpl", "--", "true"}, dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
}

}  // namespace
}  // namespace dtrain
