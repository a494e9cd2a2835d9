// Elastic Horovod whose nodes a scheduler decides, as under `horovodrun --host-discovery-script`,
// and the wait for nodes when fewer than --min-np ranks remain (horovodrun's driver waits for
// available slots up to --elastic-timeout). The real horovod.torch program hvd_elastic_train.py
// on sshd nodes in network namespaces (root; skipped otherwise).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/horovod/elastic_job.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using nlohmann::json;
using test::ElasticLaunch;
using test::ListHosts;
using test::RankLog;
using test::ReadText;
using test::RoundSizes;
using test::SshTestCluster;
using testing::DtrainProcess;

// The times (t=) of a rank's steps, in order.
std::vector<double> StepTimes(const std::string& log) {
  std::vector<double> times;
  const std::regex step("hvd-step step=\\d+ .* t=([0-9.]+)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), step); it != std::sregex_iterator();
       ++it)
    times.push_back(std::stod((*it)[1]));
  return times;
}

double LongestGap(const std::vector<double>& times) {
  double gap = 0;
  for (size_t i = 1; i < times.size(); ++i) gap = std::max(gap, times[i] - times[i - 1]);
  return gap;
}

// horovodrun --host-discovery-script: the script (here `cat` of a file the test rewrites) lists
// node0 and node1 and a host that is no node; the job starts as a round of two without node2.
// The script then lists node2: it passes the health checks, Horovod's rank 0 is told hosts were
// added, and node2's rank starts in a round of three. Then it stops listing node1: Horovod's
// rank 0 is told hosts were removed, the ranks reset at their next commit, node1's rank is
// answered "removed" and ends, and node0 and node2 finish together, with no restart.
TEST(HorovodElastic, DiscoveryScriptDecidesWhichNodesTakePart) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-disc", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = test::HgxNodes(cluster, 3);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-disc");
  const std::string hosts = dir + "/hosts.txt";
  ListHosts(hosts, "node0\nnode1:1\nnode9:4\n");
  DtrainProcess dtrain(
      ElasticLaunch("-c " + file, dir,
                    {"--min-np", "2", "--host-discovery-script", "cat " + hosts, "--health-watch",
                     "1", "--grace-period", "2", "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=20", "-x",
                     "HVD_TEST_STEP_S=0.2", "-x", "HVD_TEST_STEPS=400"}),
      dir);
  const std::string job_dir = dir + "/el";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 1).find("hvd-step step=10 ") != std::string::npos; }, 90))
      << dtrain.err();
  EXPECT_EQ(RankLog(job_dir, 2), "") << "node2 is not listed: its rank did not start";
  ListHosts(hosts, "node0\nnode1\nnode2\nnode9:4\n");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const std::string log = RankLog(job_dir, 2);
        return log.find("hvd-step step=") != std::string::npos;
      },
      60))
      << dtrain.err();
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 2).find("size=3 count=3") != std::string::npos; }, 30))
      << dtrain.err();
  ListHosts(hosts, "node0\nnode2\n");
  ASSERT_TRUE(testing::WaitFor([&] { return RoundSizes(RankLog(job_dir, 0)) == "2,3,2"; }, 60))
      << dtrain.err();
  test::EndTraining(dir);  // round 3 trains: node0 and node2 end together at the next step
  const int status = dtrain.Wait(150);
  const std::string err = dtrain.err();
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: --host-discovery-script does not list node(s) node2 yet: each joins "
                     "the elastic Horovod job when it does"),
            std::string::npos)
      << err;
  const std::string unknown = "lists host(s) node9 that are no node of the job's cluster";
  ASSERT_NE(err.find(unknown), std::string::npos) << err;
  EXPECT_EQ(err.find(unknown, err.find(unknown) + 1), std::string::npos) << "said once: " << err;
  EXPECT_NE(err.find("dtrain: node node2 is listed by --host-discovery-script and passed the "
                     "health checks 2 rounds in a row; it joins the elastic Horovod job with "
                     "rank(s) 2"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node(s) node2 joined the elastic Horovod job (rank(s) 2); 3 "
                     "rank(s) go on in round 2"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node node1 is no longer listed by --host-discovery-script; its "
                     "rank(s) 1 leave the elastic Horovod job when the others next reset"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node(s) node1 left the elastic Horovod job, no longer listed by "
                     "--host-discovery-script (rank(s) 1); 2 rank(s) go on in round 3"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("cannot tell the elastic Horovod job"), std::string::npos) << err;
  EXPECT_EQ(RoundSizes(RankLog(job_dir, 0)), "2,3,2");
  EXPECT_EQ(RoundSizes(RankLog(job_dir, 1)), "2,3") << "then it was taken out";
  EXPECT_EQ(RoundSizes(RankLog(job_dir, 2)), "3,2");
  test::ExpectEndedTogether(
      {RankLog(job_dir, 0), RankLog(job_dir, 2)},
      {"size=2 rank=0 local=0/1 cross=0/2 same=1", "size=2 rank=1 local=0/1 cross=1/2 same=1"}, 11);
  EXPECT_EQ(RankLog(job_dir, 1).find("hvd-elastic-done"), std::string::npos);
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(record["attempts"].size(), 1u) << "no restart";
  EXPECT_FALSE(record["nodes"][1].contains("quarantined")) << "taken out, not blamed";
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10));
}

// A node the script lists that cannot connect with the job's nodes where Horovod's Gloo runs
// (-x HOROVOD_GLOO_IFACE=hsn0, node2's switch port on that NIC taken off the bridge with its link
// up, as a port in the wrong VLAN) does not join: the health checks it must pass twice test it
// with nodes of the job (the peer test), and it fails them while the two others train on. Its
// port back on the bridge, it passes them and joins, and the three finish together.
TEST(HorovodElastic, ANodeListedThatCannotReachTheJobsNodesJoinsOnlyOnceItCan) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-cut", 3, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(test::AddSecondNic(cluster, i, "hsn0"), "");
  ASSERT_EQ(test::ReachSecondNics(cluster), "");
  ASSERT_EQ(test::SetSecondNicPort(cluster, 2, "nomaster"), "");
  const std::string file = test::HgxNodes(cluster, 3);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-cut");
  const std::string hosts = dir + "/hosts.txt";
  ListHosts(hosts, "node0\nnode1\n");
  DtrainProcess dtrain(
      ElasticLaunch("-c " + file, dir,
                    {"--min-np", "2", "--host-discovery-script", "cat " + hosts, "--health-watch",
                     "1", "--grace-period", "2", "-x", "HOROVOD_GLOO_IFACE=hsn0", "-x",
                     "HOROVOD_GLOO_TIMEOUT_SECONDS=20", "-x", "HVD_TEST_STEP_S=0.2", "-x",
                     "HVD_TEST_STEPS=400"}),
      dir);
  const std::string job_dir = dir + "/el";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 1).find("hvd-step step=10 ") != std::string::npos; }, 90))
      << dtrain.err();
  ListHosts(hosts, "node0\nnode1\nnode2\n");
  // Without the peer test it would pass twice in about 2 s (the interval, and two probes).
  const size_t steps_then = StepTimes(RankLog(job_dir, 0)).size();
  std::this_thread::sleep_for(std::chrono::seconds(10));
  EXPECT_EQ(dtrain.err().find("it joins the elastic Horovod job"), std::string::npos)
      << dtrain.err();
  EXPECT_EQ(RankLog(job_dir, 2), "") << "node2's rank did not start";
  EXPECT_GE(StepTimes(RankLog(job_dir, 0)).size(), steps_then + 20) << "the job trained on";
  ASSERT_EQ(test::SetSecondNicPort(cluster, 2, "master br0"), "");
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 2).find("size=3 count=3") != std::string::npos; }, 60))
      << dtrain.err();
  test::EndTraining(dir);  // node2 joined: the three end together at the next step
  const int status = dtrain.Wait(150);
  const std::string err = dtrain.err();
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: node node2 is listed by --host-discovery-script and passed the "
                     "health checks 2 rounds in a row; it joins the elastic Horovod job with "
                     "rank(s) 2"),
            std::string::npos)
      << err;
  EXPECT_EQ(RoundSizes(RankLog(job_dir, 0)), "2,3");
  EXPECT_EQ(RoundSizes(RankLog(job_dir, 2)), "3");
  EXPECT_EQ(RankLog(job_dir, 2)
                .rfind("--- dtrain: rank joins the elastic Horovod job in round 2 "
                       "---\n",
                       0),
            0u)
      << "its first start: " << RankLog(job_dir, 2);
  test::ExpectEndedTogether(
      {RankLog(job_dir, 0), RankLog(job_dir, 1), RankLog(job_dir, 2)},
      {"size=3 rank=0 local=0/1 cross=0/3 same=1", "size=3 rank=1 local=0/1 cross=1/3 same=1",
       "size=3 rank=2 local=0/1 cross=2/3 same=1"},
      11);
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(record["attempts"].size(), 1u) << "no restart";
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10));
}

// The script stops listing node1: it is taken out at the next commit, and node0's rank alone is
// fewer than --min-np 2, so it waits in the rendezvous, unanswered and training nothing. The
// script then lists node2 (a spare, never started): under --sync into the nodes' private
// workdirs the launch directory is copied to it first, then it joins at once (no notification:
// the rank in the job asked already), its rank starts with its place and the state is synced to
// it. Then the scheduler swaps node2 for node1 in one answer: both changes settle in one round,
// node1's rank starting again while node2's leaves, and node0 and node1 finish together.
TEST(HorovodElastic, BelowMinNpTheRankWaitsUntilTheScriptListsANode) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-wait", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-wait");
  const std::string hosts = dir + "/hosts.txt";
  ListHosts(hosts, "node0\nnode1\n");
  std::ofstream(dir + "/synced.txt") << "yes\n";
  const std::string file = cluster.dir() + "/workdir.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file()) << "workdir: /srv/node/work\n";
  std::vector<std::string> args = ElasticLaunch(
      "-c " + file, dir,
      {"--sync", "--min-np", "2", "--host-discovery-script", "cat " + hosts, "--health-watch", "0",
       "--grace-period", "2", "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=20", "-x", "HVD_TEST_STEP_S=0.2",
       "-x", "HVD_TEST_STEPS=400"});
  // Each rank says what it finds in its workdir first.
  args.resize(args.size() - 2);
  args.insert(args.end(), {"sh", "-c",
                           "echo synced=$(cat synced.txt); exec " + test::kHorovodPython + " " +
                               test::kElasticProgram});
  DtrainProcess dtrain(args, dir);
  const std::string job_dir = dir + "/el";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 1).find("hvd-step step=10 ") != std::string::npos; }, 90))
      << dtrain.err();
  ListHosts(hosts, "node0\n");
  ASSERT_TRUE(testing::WaitFor(
      [&] { return dtrain.err().find("they wait up to 600 s") != std::string::npos; }, 30))
      << dtrain.err();
  const size_t steps_then = StepTimes(RankLog(job_dir, 0)).size();
  std::this_thread::sleep_for(std::chrono::seconds(4));
  EXPECT_EQ(StepTimes(RankLog(job_dir, 0)).size(), steps_then) << "a step below --min-np";
  ListHosts(hosts, "node0\nnode2\n");
  ASSERT_TRUE(testing::WaitFor([&] { return StepTimes(RankLog(job_dir, 2)).size() >= 5; }, 60))
      << dtrain.err();
  ListHosts(hosts, "node0\nnode1\n");
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const std::string log = RankLog(job_dir, 1);
        const size_t back = log.find("joins the elastic Horovod job again");
        return back != std::string::npos && log.find("hvd-step", back) != std::string::npos;
      },
      60))
      << dtrain.err();
  test::EndTraining(dir);  // node1 trains again: node0 and node1 end together at the next step
  const int status = dtrain.Wait(120);
  const std::string err = dtrain.err();
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: node(s) node1 left the elastic Horovod job, no longer listed by "
                     "--host-discovery-script (rank(s) 1); 1 rank(s) remain, fewer than --min-np "
                     "2: they wait up to 600 s for nodes to join (--elastic-timeout), as "
                     "--host-discovery-script lists them"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node(s) node2 joined the elastic Horovod job (rank(s) 2); 2 rank(s) "
                     "go on in round 2"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node(s) node1 joined the elastic Horovod job again (rank(s) 1); "
                     "node(s) node2 left the elastic Horovod job, no longer listed by "
                     "--host-discovery-script (rank(s) 2); 2 rank(s) go on in round 3"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("cannot tell the elastic Horovod job"), std::string::npos) << err;
  for (const char* node : {"node0", "node1", "node2"}) {
    const std::string synced = std::string("dtrain: sync ") + node + " (";
    ASSERT_NE(err.find(synced), std::string::npos) << err;
    EXPECT_EQ(err.find(synced, err.find(synced) + 1), std::string::npos) << "synced once: " << err;
  }
  EXPECT_LT(err.find("dtrain: sync node2 ("),
            err.find("dtrain: node node2 is listed by --host-discovery-script"))
      << "synced before it joins: " << err;
  EXPECT_NE(RankLog(job_dir, 2).find("synced=yes\nhvd-start"), std::string::npos)
      << RankLog(job_dir, 2);
  const std::string log0 = RankLog(job_dir, 0);
  EXPECT_EQ(RoundSizes(log0), "2") << "rank 0 never trained alone";
  const double gap = LongestGap(StepTimes(log0));
  std::printf("rank 0 waited %.2f s between two steps for a node\n", gap);
  EXPECT_GE(gap, 4) << log0;
  test::ExpectEndedTogether(
      {log0, RankLog(job_dir, 1)},
      {"size=2 rank=0 local=0/1 cross=0/2 same=1", "size=2 rank=1 local=0/1 cross=1/2 same=1"}, 11);
  EXPECT_EQ(RankLog(job_dir, 2).find("hvd-elastic-done"), std::string::npos);
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(record["attempts"].size(), 1u) << "no restart";
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10));
}

// node1's rank is killed (SIGKILL) and its node leaves; node0's rank alone is fewer than
// --min-np 2. Under --blacklist-cooldown-range node1 could come back after its cooldown, so the
// rank waits, but only --elastic-timeout 4 s: the cooldown is longer, the wait runs out, and the
// job fails naming why, with the killed rank's status and nothing left running.
TEST(HorovodElastic, TheWaitForNodesRunsOutAtTheElasticTimeout) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-wait-out", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-wait-out");
  DtrainProcess dtrain(
      ElasticLaunch("-c " + cluster.cluster_file(), dir,
                    {"--min-np", "2", "--blacklist-cooldown-range", "60", "60", "--elastic-timeout",
                     "4", "--health-watch", "0", "--grace-period", "2", "-x", "HVD_TEST_DIE_RANK=1",
                     "-x", "HVD_TEST_DIE_STEP=10", "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=5"}),
      dir);
  const int status = dtrain.Wait(120);
  const std::string err = dtrain.err();
  EXPECT_EQ(status, 137) << "the killed rank's status: " << err;
  EXPECT_NE(err.find("dtrain: node(s) node1 left the elastic Horovod job: rank 1: killed by "
                     "SIGKILL; 1 rank(s) remain, fewer than --min-np 2: they wait up to 4 s for "
                     "nodes to join (--elastic-timeout), after their cooldown"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("1 rank(s) remained after node(s) node1 left, fewer than --min-np 2, and no "
                     "node joined within 4 s (--elastic-timeout)"),
            std::string::npos)
      << err;
  const std::string log0 = RankLog(dir + "/el", 0);
  EXPECT_EQ(RoundSizes(log0), "2") << "rank 0 never trained alone";
  EXPECT_EQ(log0.find("hvd-elastic-done"), std::string::npos);
  const json record = json::parse(ReadText(dir + "/el/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "failed");
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10))
      << "a rank of the job is still running";
}

}  // namespace
}  // namespace dtrain
