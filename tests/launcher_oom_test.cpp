// A rank the kernel's OOM killer ends is told apart from any other SIGKILL: cause "oom" in
// job.json, a line in the rank's log (the node's oom_kill count, the kernel log's line) and a note
// in the failure report, no node blamed. The real thing: the rank runs in a memory cgroup of 64
// MiB and allocates 400 MiB, on this machine (local transport) and on an sshd node in a network
// namespace (the remote wrapper). Needs root and a writable memory cgroup; skipped otherwise
// outside CI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "launcher/oom_kill.h"
#include "launcher/restart_policy.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/memory_cgroup.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

TEST(OomKill, CountsKernelLogLinesAndTheirSayings) {
  EXPECT_EQ(OomKillCount("pgfault 12\noom_kill 7\nnr_foo 3\n"), 7);
  EXPECT_EQ(OomKillCount("pgfault 12\n"), -1);
  const std::string log =
      "[  1.0] Memory cgroup out of memory: Killed process 4242 (python3) total-vm:42kB\n"
      "[  2.0] Out of memory: Killed process 17 (java) total-vm:1kB\n";
  EXPECT_EQ(KernelLogOomKill(log, 4242), "Killed process 4242 (python3) total-vm:42kB");
  EXPECT_EQ(KernelLogOomKill(log, 424), "");
  EXPECT_EQ(KernelLogOomKill(log, 0), "Killed process 17 (java) total-vm:1kB");
  const std::string line = OomKillLine("gpu-b", 3, 4, "Killed process 9 (python3)", true);
  EXPECT_EQ(line,
            "dtrain: gpu-b: the kernel's OOM killer ran while this rank did (oom_kill 3 -> 4 in "
            "/proc/vmstat); kernel log: Killed process 9 (python3)\n");
  EXPECT_TRUE(SaysOomKilled(line));
  EXPECT_TRUE(
      SaysOomKilled("slurmstepd: error: Detected 1 oom_kill event in StepId=7.0. Some of "
                    "the step tasks have been OOM Killed."));
  EXPECT_FALSE(SaysOomKilled("torch.OutOfMemoryError: CUDA out of memory"));

  ExitStatus killed;
  killed.signal = SIGKILL;
  EXPECT_THAT(OomKillNote(killed, {"x", line}), HasSubstr("ran out of host memory"));
  EXPECT_EQ(OomKillNote(killed, {"x"}), "");
  ExitStatus shell;
  shell.code = 137;  // as a remote shell or srun reports it
  EXPECT_NE(OomKillNote(shell, {line}), "");
  ExitStatus other;
  other.signal = SIGSEGV;
  EXPECT_EQ(OomKillNote(other, {line}), "");
}

TEST(OomKill, VerdictIsOomWithNoNodeBlamed) {
  const std::string said = OomKillLine("gpu-b", 3, 4, "", false);
  ExitStatus killed;
  killed.signal = SIGKILL;
  AttemptVerdict v;
  v.cause = "signal";
  v.blamed_host = "gpu-b";
  v.detail = "rank 3 on node gpu-b: killed by SIGKILL";
  MarkOutOfMemory(killed, v, said);
  EXPECT_EQ(v.cause, "oom");
  EXPECT_EQ(v.blamed_host, "");
  EXPECT_THAT(v.detail, HasSubstr("OOM killer"));
  // Another signal, or SIGKILL without the line: left alone.
  AttemptVerdict term;
  term.cause = "signal";
  ExitStatus terminated;
  terminated.signal = SIGTERM;
  MarkOutOfMemory(terminated, term, said);
  EXPECT_EQ(term.cause, "signal");
  AttemptVerdict plain;
  plain.cause = "signal";
  MarkOutOfMemory(killed, plain, "killed by hand");
  EXPECT_EQ(plain.cause, "signal");
  AttemptVerdict lost;
  lost.cause = "node-lost";
  MarkOutOfMemory(killed, lost, said);
  EXPECT_EQ(lost.cause, "node-lost");
}

void ExpectToldApart(const std::string& job_dir, const testing::DtrainRun& run) {
  EXPECT_EQ(run.status, 137) << run.err;
  const json record = json::parse(testing::ReadFile(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object()) << run.err;
  ASSERT_EQ(record["attempts"].size(), 1u) << record.dump(2);
  EXPECT_EQ(record["attempts"][0]["cause"], "oom") << record.dump(2);
  EXPECT_TRUE(record["attempts"][0]["blamed_node"].is_null()) << record.dump(2);
  EXPECT_THAT(run.err, HasSubstr("failed: killed by SIGKILL"));
  EXPECT_THAT(run.err, HasSubstr("the kernel's OOM killer ran while this rank did (oom_kill "));
  EXPECT_THAT(run.err, HasSubstr("dtrain: note: the kernel's OOM killer ended this rank"));
  EXPECT_THAT(testing::ReadFile(job_dir + "/rank-0.log"), HasSubstr("Killed process"));
}

TEST(OomKill, LocalRankKilledByTheOomKillerIsToldApart) {
  testing::MemoryCgroup cgroup("dtrain-oom-local-" + std::to_string(::getpid()), 64 << 20);
  REQUIRE_CGROUP(cgroup);
  testing::TempDir dir;
  const auto run = cgroup.Run({"launch", "--job", "oom", "-np", "1", "--", "sh", "-c",
                               testing::MemoryCgroup::Overrun(dir.path())},
                              dir.path());
  ExpectToldApart(dir.path() + "/dtrain-logs/oom", run);
}

// Over SSH the wrapper on the node sees the count go up and names the rank's own pid.
TEST(OomKill, SshRankKilledByTheOomKillerIsToldApart) {
  test::SshTestCluster cluster("oom", 1, 1);
  REQUIRE_CLUSTER(cluster);
  testing::MemoryCgroup cgroup("dtrain-oom-ssh-" + std::to_string(::getpid()), 64 << 20);
  REQUIRE_CGROUP(cgroup);
  const std::string dir = testing::ScratchDirs::Make("oom-ssh");
  const auto run = cgroup.Run({"launch", "-c", cluster.cluster_file(), "--job", "oom", "--log-dir",
                               dir, "--", "sh", "-c", testing::MemoryCgroup::Overrun(dir)},
                              dir);
  ExpectToldApart(dir + "/oom", run);
  EXPECT_THAT(run.err, HasSubstr("; kernel log: Killed process"));
}

}  // namespace
}  // namespace dtrain
