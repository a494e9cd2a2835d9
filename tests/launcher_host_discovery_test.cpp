// horovodrun's --host-discovery-script as dtrain runs it (launcher/host_discovery.h): its output
// read as horovodrun reads it, real scripts run through `sh -c` (one that fails, one that never
// answers and is killed at its deadline, leaving nothing behind), the cluster's nodes matched by
// name or address, and `dtrain launch` refusing to start with a script that fails or lists too
// few nodes within --elastic-timeout, with a message naming the script and what to do.
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "launcher/host_discovery.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"

namespace dtrain {
namespace {

using testing::DtrainRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunDtrain;

TEST(HostDiscovery, ReadsHostsAndSlotsAsHorovodrunDoes) {
  std::string error;
  const auto hosts = ParseDiscoveredHosts("node0:4\n\n  node1  \nnode0:4\nnode2 : 2\n", 8, error);
  ASSERT_TRUE(hosts) << error;
  const std::map<std::string, int> want = {{"node0", 4}, {"node1", 8}, {"node2", 2}};
  EXPECT_EQ(*hosts, want);
  EXPECT_TRUE(ParseDiscoveredHosts("", 1, error)->empty()) << "no host ready yet";
  EXPECT_FALSE(ParseDiscoveredHosts("node0:4\nnode1:x\n", 1, error));
  EXPECT_EQ(error,
            "line 2 \"node1:x\" is not HOST or HOST:SLOTS with SLOTS a whole number of at least 1");
  EXPECT_FALSE(ParseDiscoveredHosts("node0:0\n", 1, error));
  EXPECT_FALSE(ParseDiscoveredHosts("two words\n", 1, error));
  EXPECT_EQ(error, "line 1 \"two words\" names no host");
  EXPECT_FALSE(ParseDiscoveredHosts(":3\n", 1, error));
}

TEST(HostDiscovery, MatchesNodesByNameOrAddress) {
  const ClusterSpec spec = ParseClusterText(
      "transport: ssh\nnodes:\n  - {host: a, address: 10.0.0.1}\n  - {host: b, address: 10.0.0.2}\n"
      "  - {host: c, address: 10.0.0.3}\n",
      "test");
  const DiscoveredNodes found =
      MatchDiscoveredHosts(spec, {{"a", 1}, {"10.0.0.2", 1}, {"gpu-9", 8}});
  EXPECT_EQ(found.nodes, (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(found.unknown, std::vector<std::string>{"gpu-9"});
}

TEST(HostDiscovery, RunsTheScriptAndSaysWhyARunFailed) {
  HostDiscovery ok("printf 'node0:2\\nnode1\\n'", 3);
  DiscoveryRun run = ok.RunOnce();
  ASSERT_TRUE(run.ok) << run.error;
  EXPECT_EQ(run.hosts, (std::map<std::string, int>{{"node0", 2}, {"node1", 3}}));
  EXPECT_EQ(run.seq, 1);
  EXPECT_EQ(ok.LastGood().seq, 1);

  HostDiscovery failing("echo 'no scheduler answer' >&2; exit 3", 1);
  run = failing.RunOnce();
  EXPECT_FALSE(run.ok);
  EXPECT_EQ(run.error, "exit 3: no scheduler answer");
  EXPECT_EQ(failing.LastGood().seq, 0);

  testing::TempDir dir;
  const std::string pid_file = dir.path() + "/pid";
  HostDiscovery hanging("echo $$ > " + pid_file + "; exec sleep 600", 1, /*timeout_s=*/1);
  run = hanging.RunOnce();
  EXPECT_FALSE(run.ok);
  EXPECT_EQ(run.error, "it did not finish within 1 s, and was killed");
  const int pid = std::stoi(testing::ReadFile(pid_file));
  EXPECT_NE(::kill(pid, 0), 0) << "the script's process is gone";
}

TEST(HostDiscovery, RunsEverySecondOnceStarted) {
  HostDiscovery discovery("echo node0", 1);
  discovery.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  const int64_t runs = discovery.Latest().seq;
  EXPECT_GE(runs, 2) << "once a second";
  EXPECT_LE(runs, 4) << "and not more often";
}

TEST(HostDiscovery, TheStartWaitsForEnoughRanksOrGivesUpAtTheTimeout) {
  const ClusterSpec spec = ParseClusterText(
      "nodes:\n  - {host: a, slots: 2}\n  - {host: b, slots: 2}\n  - {host: c, slots: 2}\n",
      "test");
  HostDiscovery two("printf 'a\\nc\\n'", 1);
  EXPECT_EQ(WaitForDiscoveredNodes(two, spec, 4, 5), (std::set<std::string>{"a", "c"}));
  HostDiscovery one("echo b", 1);
  try {
    WaitForDiscoveredNodes(one, spec, 4, 2);
    FAIL() << "want an Error";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()),
                HasSubstr("--host-discovery-script found 2 rank(s) on node(s) b within "
                          "--elastic-timeout 2 s (nodes with 4 rank(s)); no rank was started"));
  }
  EXPECT_GE(one.Latest().seq, 2) << "it ran again while it waited";
  HostDiscovery listing("printf 'gpu-1:4\\ngpu-0\\n'", 0);
  EXPECT_EQ(WaitForDiscoveredHostList(listing, 5), "gpu-0:1,gpu-1:4");
}

// With no cluster file, -H or --hostfile, the job's nodes are the hosts the script lists first; a
// host it lists later is said to be new to the job, with how to have it join.
TEST(HostDiscovery, AHostListedLaterByADiscoveryOnlyLaunchIsSaidToBeNewToTheJob) {
  testing::TempDir dir;
  const std::string script =
      "n=$(cat runs 2>/dev/null || echo 0); echo $((n + 1)) >runs; echo localhost:1; "
      "if [ \"$n\" -ge 1 ]; then echo gpu-new:1; fi";
  const DtrainRun run =
      RunDtrain({"launch", "--min-np", "1", "--host-discovery-script", script, "--", "sleep", "4"},
                dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("dtrain: the hosts --host-discovery-script lists, localhost:1;"));
  EXPECT_THAT(run.err,
              HasSubstr("dtrain: warning: --host-discovery-script lists host(s) gpu-new that it "
                        "did not list at the start; with no cluster file, -H or --hostfile, the "
                        "job's nodes are the hosts it listed first"));
  EXPECT_THAT(run.err, Not(HasSubstr("add them to the cluster file")));
  EXPECT_EQ(UnknownHostsWarning({"b"}).find("did not list at the start"), std::string::npos);
}

TEST(HostDiscovery, LaunchRefusesAScriptThatFailsOrListsTooFew) {
  testing::TempDir dir;
  DtrainRun run = RunDtrain({"launch", "-H", "localhost:2", "--min-np", "1",
                             "--host-discovery-script", "echo broken >&2; exit 7", "--", "true"},
                            dir.path());
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--host-discovery-script \"echo broken >&2; exit 7\" failed: "
                                 "exit 7: broken; no rank was started"));
  run = RunDtrain({"launch", "-H", "localhost:2", "-np", "2", "--host-discovery-script",
                   "echo elsewhere", "--elastic-timeout", "1", "--", "true"},
                  dir.path());
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("lists host(s) elsewhere that are no node of the job's cluster"));
  EXPECT_THAT(run.err, HasSubstr("found 0 rank(s) on node(s) none within --elastic-timeout 1 s"));
  run = RunDtrain(
      {"launch", "-H", "localhost:2", "--host-discovery-script", "echo localhost", "--", "true"},
      dir.path());
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("give --min-np N (the fewest ranks it goes on with) or -np N"));
  // No cluster named: the hosts are the script's, and the banner says so (not -H).
  run = RunDtrain(
      {"launch", "--min-np", "1", "--host-discovery-script", "echo localhost:1", "--", "true"},
      dir.path());
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("dtrain: the hosts --host-discovery-script lists, localhost:1; "
                                 "ranks: 1 per node (slots the script lists)"));
  run = RunDtrain({"launch", "-H", "localhost:2", "--elastic-timeout", "5", "--", "true"},
                  dir.path());
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--blacklist-cooldown-range and --elastic-timeout are for an "
                                 "elastic Horovod job: give --min-np N too"));
}

}  // namespace
}  // namespace dtrain
