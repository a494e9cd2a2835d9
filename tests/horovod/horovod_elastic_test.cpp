// Elastic Horovod under `dtrain launch --min-np N`, as under `horovodrun --min-np N -H ...`: a real
// horovod.torch program with hvd.elastic.run and a TorchState (hvd_elastic_train.py, Horovod
// 0.28.1 from .venv-horovod). Real faults on sshd nodes in network namespaces (root; skipped
// otherwise): a rank killed with SIGKILL, and a node whose link is cut (`ip link set eth0
// down`). The node leaves with all its ranks, the others go on from their last commit in a new
// round with fewer ranks and finish, and dtrain exits 0. On this machine alone: a failure that
// leaves fewer than --min-np ranks ends the job, and the elastic options are checked.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tests/horovod/elastic_job.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;
using test::ElasticLaunch;
using test::RankLog;
using test::ReadText;
using test::RoundSizes;
using test::SshTestCluster;
using testing::DtrainProcess;
using testing::Since;

// What a rank that went on to the end printed: every step of the old round with all `before`
// ranks, every later one with `after`, and the same parameters as every other rank at the end.
void ExpectWentOn(const std::string& log, int before, int after, const std::string& done) {
  std::smatch m;
  std::string rest = log;
  int steps = 0, old_round = 0, new_round = 0;
  const std::regex step("hvd-step step=(\\d+) rank=(\\d+) size=(\\d+) count=(\\d+)");
  while (std::regex_search(rest, m, step)) {
    ++steps;
    EXPECT_EQ(m[3], m[4]) << "every rank of the round took part: " << m[0];
    const int size = std::stoi(m[3]);
    if (size == before) {
      EXPECT_EQ(new_round, 0) << "a step with " << before << " ranks after the new round";
      ++old_round;
    } else {
      EXPECT_EQ(size, after) << m[0];
      ++new_round;
    }
    rest = m.suffix();
  }
  EXPECT_GT(old_round, 0) << log;
  EXPECT_GT(new_round, 0) << log;
  EXPECT_NE(log.find("hvd-elastic-done step=30 " + done + " same=1"), std::string::npos)
      << "want " << done << " in:\n"
      << log;
}

// The rank that waits on the dead one may learn of it only from Gloo's timeout (30 s by default,
// 5 s here), depending on which collective each rank is in.
TEST(HorovodElastic, KilledRankLeavesWithItsNodeAndTheOthersFinish) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-kill", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-kill");
  DtrainProcess dtrain(
      ElasticLaunch("-c " + cluster.cluster_file(), dir,
                    {"--min-np", "2", "--health-watch", "0", "-x", "HVD_TEST_DIE_RANK=1", "-x",
                     "HVD_TEST_DIE_STEP=10", "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=5"}),
      dir);
  ASSERT_EQ(dtrain.Wait(120), 0) << dtrain.err();
  const std::string err = dtrain.err();
  const std::string job_dir = dir + "/el";
  EXPECT_NE(err.find("dtrain: node(s) node1 left the elastic Horovod job: rank 1: killed by "
                     "SIGKILL; 2 rank(s) go on in round 2"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node node1 quarantined for the rest of job el"), std::string::npos)
      << err;
  EXPECT_NE(RankLog(job_dir, 1).find("rank 1 kills itself at step 10"), std::string::npos);
  // node0 and node2 go on as Horovod's ranks 0 and 1 of 2, each still alone on its node.
  ExpectWentOn(RankLog(job_dir, 0), 3, 2, "size=2 rank=0 local=0/1 cross=0/2");
  ExpectWentOn(RankLog(job_dir, 2), 3, 2, "size=2 rank=1 local=0/1 cross=1/2");

  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(record["attempts"].size(), 1u) << "no restart: the job went on";
  bool said = false;
  for (const json& e : record["events"]) said = said || e["kind"] == "elastic_round";
  EXPECT_TRUE(said) << record["events"].dump(2);
  EXPECT_EQ(record["nodes"][1]["quarantined"],
            "a rank on it failed in round 1 of the elastic Horovod job");
  const testing::DtrainRun status =
      testing::RunDtrain({"status", "--log-dir", dir, "--job", "el"}, dir);
  EXPECT_EQ(status.status, 0) << status.err;
  EXPECT_NE(status.out.find("\nelastic: node(s) node1 left the elastic Horovod job: rank 1: killed "
                            "by SIGKILL; 2 rank(s) go on in round 2\n"),
            std::string::npos)
      << status.out;
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10))
      << "a rank of the job is still running";
}

// node1's link goes down at step 10: dtrain names it lost after --node-timeout, the ranks on
// node0 see their collective time out (HOROVOD_GLOO_TIMEOUT_SECONDS) and go on as a round of two
// ranks on one node.
TEST(HorovodElastic, CutNodeIsLostAndTheRanksOfTheOtherGoOn) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-cut", 2, 2);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-cut");
  DtrainProcess dtrain(ElasticLaunch("-c " + cluster.cluster_file(), dir,
                                     {"--min-np", "2", "--health-watch", "0", "--node-timeout", "3",
                                      "--grace-period", "2", "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=5",
                                      "-x", "HVD_TEST_STEP_S=0.2"}),
                       dir);
  const std::string job_dir = dir + "/el";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 2).find("hvd-step step=10 ") != std::string::npos; }, 90))
      << dtrain.err();
  cluster.OnNode(1, "ip link set eth0 down");
  const Clock::time_point cut = Clock::now();
  double on_s = -1;
  if (testing::WaitFor(
          [&] { return RankLog(job_dir, 0).find("size=2 count=2") != std::string::npos; }, 60))
    on_s = Since(cut);
  const int status = dtrain.Wait(90);
  cluster.OnNode(1, "ip link set eth0 up");
  const std::string err = dtrain.err();
  std::printf("node1 cut: the ranks of node0 trained again as a round of 2 after %.2f s\n", on_s);
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: node(s) node1 left the elastic Horovod job: node node1 lost: no "
                     "answer for 3 s"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("last seen"), std::string::npos) << err;
  EXPECT_NE(err.find("; 2 rank(s) go on in round 2"), std::string::npos)
      << "ranks 2 and 3 were lost with their node, said once:\n"
      << err;
  // Lost after 3 s, then the Gloo timeout of the ranks that wait on node1 (5 s).
  EXPECT_GE(on_s, 4) << err;
  EXPECT_LE(on_s, 20) << err;
  ExpectWentOn(RankLog(job_dir, 0), 4, 2, "size=2 rank=0 local=0/2 cross=0/1");
  ExpectWentOn(RankLog(job_dir, 1), 4, 2, "size=2 rank=1 local=1/2 cross=0/1");
  EXPECT_NE(err.find("node node1 was lost: its metrics and traces were not fetched"),
            std::string::npos)
      << "nothing is asked of a lost node at the end:\n"
      << err;
  // node1's ranks ended on their own when they no longer heard from dtrain; with the link back,
  // nothing of the job runs anywhere (the nodes share this machine's process table).
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 15))
      << "a rank of the job is still running";
}

// A GPU falls off the bus while the ranks train: an Xid 79 enters node1's kernel log (the dmesg
// stand-in first on its PATH, the nodes looking like HGX H100 nodes). The health watch (every
// second) finds it, node1's rank is stopped and leaves the job, and node0 and node2 go on. It is
// found within the interval and two rounds of probes (the one under way when the Xid came may have
// read the kernel log before it): about 1 s on an idle machine, but a round took up to 3 s beside
// two busy loops on the 2-core test machine. A step takes 0.5 s, so that the 20 steps after the
// fault outlast that (at 0.2 s the job once ended before node1 left).
TEST(HorovodElastic, NodeFoundUnfitByTheHealthWatchLeavesAndTheOthersGoOn) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-unfit", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = test::HgxNodes(cluster, 3);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-unfit");
  DtrainProcess dtrain(
      ElasticLaunch("-c " + file, dir,
                    {"--min-np", "2", "--health-watch", "1", "--grace-period", "2", "-x",
                     "HOROVOD_GLOO_TIMEOUT_SECONDS=5", "-x", "HVD_TEST_STEP_S=0.5"}),
      dir);
  const std::string job_dir = dir + "/el";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 1).find("hvd-step step=10 ") != std::string::npos; }, 90))
      << dtrain.err();
  std::ofstream(cluster.dir() + "/node1-bin/dmesg.txt", std::ios::app)
      << "[ 5012.345678] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU "
         "has fallen off the bus.\n";
  const Clock::time_point broken = Clock::now();
  double found_s = -1;
  if (testing::WaitFor(
          [&] { return dtrain.err().find("failed the health watch") != std::string::npos; }, 20))
    found_s = Since(broken);
  const int status = dtrain.Wait(90);
  const std::string err = dtrain.err();
  std::printf("node1's GPU fell off the bus: found after %.2f s\n", found_s);
  ASSERT_EQ(status, 0) << err;
  EXPECT_GE(found_s, 0) << err;
  EXPECT_LE(found_s, 8) << "the interval (1 s) and two rounds of probes: " << err;
  EXPECT_NE(err.find("dtrain: node node1 failed the health watch"), std::string::npos) << err;
  EXPECT_NE(err.find("Xid 79 on GPU 3"), std::string::npos) << err;
  EXPECT_NE(err.find("; its rank(s) leave the elastic Horovod job"), std::string::npos) << err;
  EXPECT_NE(err.find("dtrain: node(s) node1 left the elastic Horovod job: node node1 failed the "
                     "health watch: "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("2 rank(s) go on in round 2"), std::string::npos) << err;
  ExpectWentOn(RankLog(job_dir, 0), 3, 2, "size=2 rank=0 local=0/1 cross=0/2");
  ExpectWentOn(RankLog(job_dir, 2), 3, 2, "size=2 rank=1 local=0/1 cross=1/2");
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["attempts"].size(), 1u) << "the job went on, no restart";
  EXPECT_NE(record["nodes"][1].value("quarantined", "").find("failed the health watch"),
            std::string::npos)
      << record["nodes"].dump(2);
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10));
}

// The sizes of the rounds a rank's steps were taken in, each once in a row ("3,2,3"); every step
// with all ranks of its round.
// horovodrun --blacklist-cooldown-range: node1's GPU falls off the bus (an Xid 79 in its kernel
// log), the health watch finds it, and node1 leaves; node0 and node2 go on as a round of two.
// Then the GPU is back (the line leaves the log, as after a reset): once the cooldown is over and
// node1 passed the health checks twice, Horovod's rank 0 is told that hosts were added, the ranks
// in the job reset at their next commit (HostsUpdatedInterrupt) and ask for their place, node1's
// rank starts again with its place in the new round, the state is synced to it, and all three
// finish together, node1 last in rank order. (The Gloo timeout covers the new rank's start.)
TEST(HorovodElastic, NodeThatLeftJoinsAgainAfterItsCooldownAndTheJobGrowsBack) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-back", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = test::HgxNodes(cluster, 3);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-back");
  DtrainProcess dtrain(ElasticLaunch("-c " + file, dir,
                                     {"--min-np", "2", "--health-watch", "1", "--grace-period", "2",
                                      "--blacklist-cooldown-range", "1", "2", "-x",
                                      "HOROVOD_GLOO_TIMEOUT_SECONDS=20", "-x",
                                      "HVD_TEST_STEP_S=0.2", "-x", "HVD_TEST_STEPS=400"}),
                       dir);
  const std::string job_dir = dir + "/el";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 1).find("hvd-step step=10 ") != std::string::npos; }, 90))
      << dtrain.err();
  const std::string dmesg = cluster.dir() + "/node1-bin/dmesg.txt";
  const std::string healthy = ReadText(dmesg);
  std::ofstream(dmesg, std::ios::app)
      << "[ 5012.345678] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU "
         "has fallen off the bus.\n";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return dtrain.err().find("go on in round 2") != std::string::npos; }, 40))
      << dtrain.err();
  std::ofstream(dmesg, std::ios::trunc) << healthy;  // the GPU is back
  double grew_s = -1;  // from the node's return to the new rank's first step
  if (testing::WaitFor(
          [&] {
            return dtrain.err().find("it joins the elastic Horovod job again") != std::string::npos;
          },
          30)) {
    const Clock::time_point back = Clock::now();
    if (testing::WaitFor(
            [&] {
              const std::string log = RankLog(job_dir, 1);
              const size_t joined = log.find("joins the elastic Horovod job again");
              return joined != std::string::npos &&
                     log.find("hvd-step", joined) != std::string::npos;
            },
            60))
      grew_s = Since(back);
  }
  test::EndTraining(dir);  // the job grew back: the three end together at the next step
  const int status = dtrain.Wait(120);
  const std::string err = dtrain.err();
  std::printf("node1 back: its rank took its first step %.2f s after it passed the checks\n",
              grew_s);
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(
      err.find("dtrain: node node1 may join the elastic Horovod job again after a cooldown of "
               "2.0 s (--blacklist-cooldown-range 1 2, the 1st time it left) and 2 health "
               "checks in a row"),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node node1 passed the health checks 2 rounds in a row after its "
                     "cooldown of 2.0 s; it joins the elastic Horovod job again with rank(s) 1"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node(s) node1 joined the elastic Horovod job again (rank(s) 1); 3 "
                     "rank(s) go on in round 3"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("cannot tell the elastic Horovod job"), std::string::npos) << err;
  EXPECT_GE(grew_s, 0) << err;
  EXPECT_EQ(RoundSizes(RankLog(job_dir, 0)), "3,2,3");
  EXPECT_EQ(RoundSizes(RankLog(job_dir, 2)), "3,2,3");
  const std::string log1 = RankLog(job_dir, 1);
  const size_t joined =
      log1.find("--- dtrain: rank joins the elastic Horovod job again in round 3 ---");
  ASSERT_NE(joined, std::string::npos) << log1;
  EXPECT_EQ(RoundSizes(log1.substr(0, joined)), "3") << "steps before it left";
  EXPECT_EQ(RoundSizes(log1.substr(joined)), "3") << "and after it came back";
  // node0 stays Horovod's rank 0 (the state everyone syncs from); node1 comes last.
  test::ExpectEndedTogether(
      {RankLog(job_dir, 0), RankLog(job_dir, 2), log1},
      {"size=3 rank=0 local=0/1 cross=0/3 same=1", "size=3 rank=1 local=0/1 cross=1/3 same=1",
       "size=3 rank=2 local=0/1 cross=2/3 same=1"},
      11);
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(record["attempts"].size(), 1u) << "the job grew back without a restart";
  bool returned = false;
  for (const json& e : record["events"]) returned = returned || e["kind"] == "node_returned";
  EXPECT_TRUE(returned) << record["events"].dump(2);
  EXPECT_FALSE(record["nodes"][1].contains("quarantined")) << record["nodes"].dump(2);
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10));
}

// Writes `hosts` as the discovery script's file in one step (a rename), as a script that reads a
// scheduler's answer would: never a half-written list.
// Rank 1's process is stopped (SIGSTOP) after step 10, as a hung process is: it neither fails nor
// ends, and the others wait for it in their collective. Under --on-stall stop the stall watch
// names it after --stall-timeout, its node leaves the job (the stopped rank is ended) and node0
// and node2 go on in a round of two.
TEST(HorovodElastic, StalledRankLeavesWithItsNodeUnderOnStallStop) {
  REQUIRE_HOROVOD();
  SshTestCluster cluster("hvd-elastic-stall", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-stall");
  DtrainProcess dtrain(
      ElasticLaunch("-c " + cluster.cluster_file(), dir,
                    {"--min-np", "2", "--health-watch", "0", "--stall-timeout", "8", "--on-stall",
                     "stop", "--grace-period", "2", "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=5", "-x",
                     "HVD_TEST_STEP_S=0.2"}),
      dir);
  const std::string job_dir = dir + "/el";
  ASSERT_TRUE(testing::WaitFor(
      [&] { return RankLog(job_dir, 1).find("hvd-step step=10 ") != std::string::npos; }, 90))
      << dtrain.err();
  std::smatch pid;
  const std::string log1 = RankLog(job_dir, 1);
  ASSERT_TRUE(std::regex_search(log1, pid, std::regex("hvd-start rank=1 host=\\S+ pid=(\\d+)")))
      << log1;
  ASSERT_EQ(kill(std::stoi(pid[1]), SIGSTOP), 0);
  const Clock::time_point stopped = Clock::now();
  double on_s = -1;
  if (testing::WaitFor(
          [&] { return RankLog(job_dir, 0).find("size=2 count=2") != std::string::npos; }, 60))
    on_s = Since(stopped);
  const int status = dtrain.Wait(90);
  const std::string err = dtrain.err();
  std::printf("rank 1 stopped: the others trained again as a round of 2 after %.2f s\n", on_s);
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(err.find("dtrain: rank(s) 1 on node node1 stalled: no progress for 8 s (--on-stall "
                     "stop); its rank(s) leave the elastic Horovod job"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dtrain: node(s) node1 left the elastic Horovod job: rank(s) 1 on node node1 "
                     "stalled: no progress for 8 s; 2 rank(s) go on in round 2"),
            std::string::npos)
      << err;
  // The stall timeout and the watch's probe; the others, back from their Gloo timeout, wait in
  // the rendezvous and are answered once rank 1 left.
  EXPECT_GE(on_s, 8) << err;
  EXPECT_LE(on_s, 25) << err;
  ExpectWentOn(RankLog(job_dir, 0), 3, 2, "size=2 rank=0 local=0/1 cross=0/2");
  ExpectWentOn(RankLog(job_dir, 2), 3, 2, "size=2 rank=1 local=0/1 cross=1/2");
  EXPECT_TRUE(fs::exists(job_dir + "/stall-1.txt"));
  const json record = json::parse(ReadText(job_dir + "/job.json"), nullptr, false);
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_EQ(record["attempts"].size(), 1u) << "the job went on, no restart";
  EXPECT_EQ(record["nodes"][1].value("quarantined", ""),
            "a rank on it stalled in the elastic Horovod job")
      << record["nodes"].dump(2);
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10))
      << "a rank of the job is still running";
}

// All ranks on this machine: the failed rank's node is the only one, so none would remain. (Rank
// 0 is answered -1, as the unit tests check; whether it says so before the stop reaches it is a
// race, so its log is not read.)
TEST(HorovodElastic, TooFewRanksLeftEndsTheJobWithTheFailedRanksStatus) {
  REQUIRE_HOROVOD();
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-min");
  DtrainProcess dtrain(
      ElasticLaunch("-H localhost:2", dir,
                    {"--min-np", "1", "-x", "HVD_TEST_DIE_RANK=1", "-x", "HVD_TEST_DIE_STEP=5",
                     "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=5"}),
      dir);
  EXPECT_EQ(dtrain.Wait(120), 137) << dtrain.err();
  const std::string err = dtrain.err();
  EXPECT_NE(err.find("dtrain: the elastic Horovod job cannot go on: 0 rank(s) would remain after "
                     "node(s) localhost left, fewer than --min-np 1"),
            std::string::npos)
      << err;
  EXPECT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_JOB=el").empty(); }, 10));
}

// The ranks waiting for a stalled one recover only once their Gloo timeout ended the wait
// (StalledRankLeavesWithItsNodeUnderOnStallStop): a stall timeout not longer is warned of.
TEST(HorovodElastic, StallTimeoutNotAboveTheGlooTimeoutIsWarnedOf) {
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-stall-warning");
  const std::string warning = "dtrain: warning: --stall-timeout 20 is not longer than Horovod's";
  const std::vector<std::string> stall = {"--stall-timeout", "20", "--on-stall", "stop"};
  auto launch = [&](std::vector<std::string> more) {
    std::vector<std::string> all = {"launch",      "--log-dir", dir, "-H",
                                    "localhost:1", "--min-np",  "1"};
    all.insert(all.end(), more.begin(), more.end());
    all.insert(all.end(), {"--", "true"});
    return testing::RunDtrain(all, dir);
  };
  testing::DtrainRun run = launch(stall);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find(warning + " Gloo timeout (30 s, Horovod's default)"), std::string::npos)
      << run.err;
  run = launch(
      {"--stall-timeout", "20", "--on-stall", "stop", "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=25"});
  EXPECT_NE(run.err.find(warning + " Gloo timeout (25 s, HOROVOD_GLOO_TIMEOUT_SECONDS)"),
            std::string::npos)
      << run.err;
  run = launch(
      {"--stall-timeout", "20", "--on-stall", "stop", "-x", "HOROVOD_GLOO_TIMEOUT_SECONDS=10"});
  EXPECT_EQ(run.err.find("dtrain: warning: --stall-timeout"), std::string::npos) << run.err;
  run = launch({"--stall-timeout", "20"});  // reported only: nothing leaves
  EXPECT_EQ(run.err.find("dtrain: warning: --stall-timeout"), std::string::npos) << run.err;
}

TEST(HorovodElastic, ElasticOptionsAreChecked) {
  const std::string dir = testing::ScratchDirs::Make("hvd-elastic-options");
  const std::string slurm = dir + "/slurm.yaml";
  testing::WriteFile(slurm, "transport: slurm\nnodes:\n  - {host: a}\n  - {host: b}\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-H", "localhost:2", "--max-np", "2"},
       "--max-np, --reset-limit, --blacklist-cooldown-range and --elastic-timeout are for an "
       "elastic"},
      {{"-H", "localhost:2", "--blacklist-cooldown-range", "1", "9"}, "give --min-np N too"},
      {{"-H", "localhost:2", "--min-np", "1", "--blacklist-cooldown-range", "0", "9"},
       "1 <= MIN <= MAX <= 3600 (as horovodrun's)"},
      {{"-H", "localhost:2", "--min-np", "1", "--blacklist-cooldown-range", "9", "4"},
       "1 <= MIN <= MAX <= 3600"},
      {{"-H", "localhost:2", "--reset-limit", "1"}, "give --min-np N too"},
      {{"-H", "localhost:2", "--elastic-timeout", "5"}, "give --min-np N too"},
      {{"-H", "localhost:2", "--min-np", "3"}, "--min-np 3: the job has only 2 rank(s)"},
      {{"-H", "localhost:2", "--min-np", "1", "--max-np", "1"},
       "an elastic job never grows past its start"},
      {{"-c", slurm, "--min-np", "1"}, "not under Slurm"},
      {{"-H", "localhost:2", "--host-discovery-script", "x"},
       "or -np N (the ranks it starts with)"},
      {{"-H", "localhost:2", "--slots-per-host", "2"}, "goes with --host-discovery-script"},
  };
  for (const auto& [args, want] : cases) {
    std::vector<std::string> all = {"launch", "--log-dir", dir};
    all.insert(all.end(), args.begin(), args.end());
    all.insert(all.end(), {"--", "true"});
    const testing::DtrainRun run = testing::RunDtrain(all, dir);
    EXPECT_EQ(run.status, 2) << args.back() << ": " << run.err;
    EXPECT_NE(run.err.find(want), std::string::npos) << "want " << want << ":\n" << run.err;
  }
}

}  // namespace
}  // namespace dtrain
