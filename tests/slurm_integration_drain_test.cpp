// --drain on a real Slurm on this machine (tests/support/slurm_cluster.h): `dtrain doctor
// --drain` drains the Slurm node whose check failed with the doctor's reason, which sinfo shows,
// and no other; `dtrain launch --drain` drains the node it quarantines for failing the health
// check before the start, or the health watch during the run; a node Slurm does not have cannot
// be drained, and dtrain says what scontrol said and what to do; --drain on a cluster whose nodes
// are not Slurm's is refused before anything runs; a doctor cut short by Ctrl-C drains nothing.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/slurm_drain.h"
#include "launcher/slurm/slurm_child.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

// "STATE|REASON" of Slurm node `node`, as sinfo shows it.
std::string StateAndReason(const std::string& node) {
  const SlurmCommandResult shown =
      RunSlurmCommand({"sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"}, "", 10000);
  return shown.out.substr(0, shown.out.find('\n'));
}

class DrainOnSlurm : public test::SlurmTransportTest {
 protected:
  void SetUp() override {
    test::SlurmTransportTest::SetUp();
    if (IsSkipped() || HasFailure()) return;
    if (access(kDtrain.c_str(), X_OK) != 0) GTEST_SKIP() << kDtrain << " is not built";
    dir_ = "/tmp/dtrain-slurm-test-drain-" + std::to_string(getpid());
    RunSlurmCommand({"mkdir", "-p", dir_}, "", 10000);
  }
  // node2 goes back to Slurm whatever the test did, for the tests after it.
  void TearDown() override {
    if (dir_.empty()) return;
    RunSlurmCommand({"scontrol", "update", "NodeName=node2", "State=RESUME"}, "", 10000);
    RunSlurmCommand({"rm", "-rf", dir_}, "", 10000);
  }
  // A two-node cluster file with one health check of its own, `name` running `run`.
  std::string ClusterWithCheck(const std::string& name, const std::string& run) {
    std::ofstream(dir_ + "/cluster.yaml")
        << "transport: slurm\nslurm: {time: \"00:05:00\"}\n"
        << "nodes:\n  - {host: a, slots: 1}\n  - {host: b, slots: 1}\n"
        << "log_dir: " << dir_ << "/logs\n"
        << "health_checks:\n  - {name: " << name << ", run: '" << run << "'}\n";
    return dir_ + "/cluster.yaml";
  }
  // ... whose check fails on node b, wherever it runs.
  std::string FailingOnB() {
    RunSlurmCommand({"sh", "-c", "echo ok >" + dir_ + "/scratch-a"}, "", 10000);
    return ClusterWithCheck("scratch", "test -f " + dir_ +
                                           "/scratch-$DTRAIN_NODE || { echo \"no scratch on "
                                           "$DTRAIN_NODE\"; exit 1; }");
  }
  // sinfo's "STATE|REASON" of node2 once it is drained (after the batch job holding it ended),
  // or as it is after 10 s.
  static std::string Node2Drained() {
    std::string node2;
    for (int i = 0; i < 50; ++i) {
      node2 = StateAndReason("node2");
      if (node2.rfind("drained|", 0) == 0) break;
      usleep(200 * 1000);
    }
    return node2;
  }
  std::string dir_;
};

TEST_F(DrainOnSlurm, TheDoctorDrainsTheNodeWhoseCheckFailedAndNoOther) {
  ASSERT_EQ(StateAndReason("node2").find("drain"), std::string::npos) << StateAndReason("node2");
  const SlurmCommandResult run =
      RunSlurmCommand({kDtrain, "doctor", "-c", FailingOnB(), "--drain"}, "", 90000);
  EXPECT_EQ(run.status, 1) << run.err;  // a check failed
  EXPECT_NE(run.err.find("dtrain doctor: drained Slurm node node2 (node b): dtrain doctor: node b: "
                         "health check 'scratch' failed (exit 1): no scratch on b; `scontrol "
                         "update NodeName=node2 State=RESUME` puts it back"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("node1"), std::string::npos) << run.err;
  EXPECT_EQ(Node2Drained(),
            "drained|dtrain doctor: node b: health check 'scratch' failed (exit 1): no scratch on "
            "b");
  EXPECT_EQ(StateAndReason("node1").find("drain"), std::string::npos) << StateAndReason("node1");
  // As the doctor says, RESUME puts it back: a job of two nodes runs again.
  RunSlurmCommand({"scontrol", "update", "NodeName=node2", "State=RESUME"}, "", 10000);
  const SlurmCommandResult both = RunSlurmCommand(
      {"srun", "--nodes=2", "--time=1", "sh", "-c", "echo $SLURMD_NODENAME"}, "", 60000);
  EXPECT_EQ(both.status, 0) << both.err;
  EXPECT_NE(both.out.find("node2"), std::string::npos) << both.out << both.err;
}

TEST_F(DrainOnSlurm, TheLaunchDrainsTheNodeItQuarantinesForFailingTheHealthCheck) {
  ASSERT_EQ(StateAndReason("node2").find("drain"), std::string::npos) << StateAndReason("node2");
  const SlurmCommandResult run = RunSlurmCommand(
      {kDtrain, "launch", "-c", FailingOnB(), "--job", "site", "--drain", "--", "true"}, "", 90000);
  EXPECT_EQ(run.status, 1) << run.err;  // two nodes needed, one fit
  EXPECT_NE(run.err.find("dtrain: drained Slurm node node2 (node b): dtrain launch: job site: "
                         "failed the health check before start: node b: health check 'scratch' "
                         "failed (exit 1): no scratch on b; `scontrol update NodeName=node2 "
                         "State=RESUME` puts it back"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(Node2Drained(),
            "drained|dtrain launch: job site: failed the health check before start: node b: "
            "health check 'scratch' failed (exit 1): no scratch on b");
  const std::string text = testing::ReadFile(dir_ + "/logs/site/job.json");
  EXPECT_NE(text.find("\"kind\": \"drained\""), std::string::npos) << text;
  // Without --drain the launch quarantines node b for itself and drains nothing.
  RunSlurmCommand({"scontrol", "update", "NodeName=node2", "State=RESUME"}, "", 10000);
  const SlurmCommandResult plain = RunSlurmCommand(
      {kDtrain, "launch", "-c", dir_ + "/cluster.yaml", "--job", "plain", "--", "true"}, "", 90000);
  EXPECT_EQ(plain.status, 1) << plain.err;
  EXPECT_EQ(plain.err.find("drained"), std::string::npos) << plain.err;
  EXPECT_EQ(StateAndReason("node2").find("drain"), std::string::npos) << StateAndReason("node2");
}

// The same from the health watch: node b's own check starts failing while the job runs (a file
// appears that it looks for), the watch (every second) finds it, the attempt stops, node b is
// quarantined and its Slurm node drained with the watch's words.
TEST_F(DrainOnSlurm, TheLaunchDrainsANodeTheHealthWatchFindsUnfitDuringTheRun) {
  ASSERT_EQ(StateAndReason("node2").find("drain"), std::string::npos) << StateAndReason("node2");
  const std::string file = ClusterWithCheck(
      "gpu-gone",
      "test ! -f " + dir_ + "/gone-$DTRAIN_NODE || { echo \"GPU gone on $DTRAIN_NODE\"; exit 1; }");
  const std::string marker = dir_ + "/gone-b";
  // Rank 0 makes node b's check fail once the job has run for a second.
  const std::string job = "[ $RANK = 0 ] && { sleep 1; touch " + marker + "; }; sleep 60";
  const SlurmCommandResult run =
      RunSlurmCommand({kDtrain, "launch", "-c", file, "--job", "watched", "--drain",
                       "--health-watch", "1", "--", "sh", "-c", job},
                      "", 90000);
  EXPECT_EQ(run.status, 255) << run.err;  // stopped by the health watch, no restart
  EXPECT_NE(run.err.find("dtrain: node b failed the health watch "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("dtrain: drained Slurm node node2 (node b): dtrain launch: job watched: "
                         "failed the health watch during the run: node b: health check "
                         "'gpu-gone' failed (exit 1): GPU gone on b; `scontrol update "
                         "NodeName=node2 State=RESUME` puts it back"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(Node2Drained(),
            "drained|dtrain launch: job watched: failed the health watch during the run: node b: "
            "health check 'gpu-gone' failed (exit 1): GPU gone on b");
}

// Ctrl-C once node b's check has failed and while node a's still runs: the doctor stops at once
// (exit 130) and drains no node, not even b: a run cut short drains nothing ("run the doctor again
// to the end"). Node a's check ends with the run.
TEST_F(DrainOnSlurm, CtrlCDuringTheDoctorDrainsNoNode) {
  const std::string failed = dir_ + "/failed-b";
  const std::string file =
      ClusterWithCheck("scratch", "if [ $DTRAIN_NODE = a ]; then sleep 83; fi; test -f " + dir_ +
                                      "/scratch-$DTRAIN_NODE || { touch " + failed +
                                      "; echo \"no scratch on $DTRAIN_NODE\"; exit 1; }");
  testing::DtrainProcess doctor({"doctor", "-c", file, "--drain"}, dir_, {"NO_COLOR=1"});
  ASSERT_TRUE(testing::WaitFor([&] { return access(failed.c_str(), F_OK) == 0; }, 60))
      << doctor.err();
  // Node b's probe goes on after its check failed; once it has ended, its result reaches the
  // doctor.
  ASSERT_TRUE(
      testing::WaitFor([] { return testing::ProcessesWithEnv("DTRAIN_NODE=b").empty(); }, 30))
      << doctor.err();
  usleep(1000 * 1000);
  ASSERT_TRUE(doctor.running()) << doctor.err();
  doctor.Signal(SIGINT);  // what Ctrl-C at the terminal sends
  const int status = doctor.Wait(10);
  const std::string err = doctor.err();
  EXPECT_EQ(status, 130) << err;
  EXPECT_NE(doctor.out().find("no scratch on b"), std::string::npos) << doctor.out();
  EXPECT_NE(err.find("dtrain doctor: interrupted by SIGINT"), std::string::npos) << err;
  EXPECT_NE(err.find("no node was drained"), std::string::npos) << err;
  EXPECT_EQ(err.find("drained Slurm node"), std::string::npos) << err;
  usleep(2000 * 1000);  // a drain would have shown by now
  EXPECT_EQ(StateAndReason("node2").find("drain"), std::string::npos) << StateAndReason("node2");
  EXPECT_EQ(StateAndReason("node1").find("drain"), std::string::npos) << StateAndReason("node1");
  EXPECT_TRUE(testing::WaitFor([] { return system("pgrep -f 'slee[p] 83' >/dev/null") != 0; }, 10))
      << "node a's check outlived the doctor";
}

TEST_F(DrainOnSlurm, ANodeThatCannotBeDrainedIsSaidWithWhatToDo) {
  bool all_ok = true;
  const std::vector<std::string> said =
      DrainSlurmNodes({{"b", "node9", "dtrain doctor: node b: Xid 79 on GPU 3"}}, &all_ok);
  EXPECT_FALSE(all_ok);
  ASSERT_EQ(said.size(), 1u);
  EXPECT_EQ(said[0].rfind("could not drain Slurm node node9 (node b): scontrol: ", 0), 0u)
      << said[0];
  EXPECT_NE(said[0].find("Invalid node name specified"), std::string::npos) << said[0];
  EXPECT_NE(said[0].find("ask an admin to run scontrol update NodeName=node9 State=DRAIN "
                         "Reason=\"dtrain doctor: node b: Xid 79 on GPU 3\""),
            std::string::npos)
      << said[0];
}

TEST_F(DrainOnSlurm, DrainIsForSlurmClustersOnly) {
  std::ofstream(dir_ + "/ssh.yaml") << "transport: ssh\nnodes: [{host: a}, {host: b}]\n";
  for (const char* command : {"doctor", "launch"}) {
    std::vector<std::string> argv = {kDtrain, command, "-c", dir_ + "/ssh.yaml", "--drain"};
    if (std::string(command) == "launch") argv.insert(argv.end(), {"--", "true"});
    const SlurmCommandResult run = RunSlurmCommand(argv, "", 30000);
    EXPECT_EQ(run.status, 2) << command << ": " << run.err;
    EXPECT_NE(run.err.find("--drain drains Slurm nodes, and this cluster's nodes are not Slurm's"),
              std::string::npos)
        << command << ": " << run.err;
  }
}

}  // namespace
}  // namespace dtrain
