// `dtrain doctor --drain` on a real Slurm on this machine (tests/support/slurm_cluster.h): the
// Slurm node whose check failed is drained with the doctor's reason, which sinfo shows, and no
// other; a node Slurm does not have cannot be drained, and the doctor says what scontrol said and
// what to do; --drain on a cluster whose nodes are not Slurm's is refused before anything runs.
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "doctor/slurm_drain.h"
#include "launcher/slurm/slurm_child.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

// "STATE|REASON" of Slurm node `node`, as sinfo shows it.
std::string StateAndReason(const std::string& node) {
  const SlurmCommandResult shown =
      RunSlurmCommand({"sinfo", "-h", "-N", "-n", node, "-o", "%T|%E"}, "", 10000);
  std::string line = shown.out.substr(0, shown.out.find('\n'));
  return line;
}

class DtrainDoctorOnSlurm : public test::SlurmTransportTest {
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
  std::string dir_;
};

TEST_F(DtrainDoctorOnSlurm, DrainsTheNodeWhoseCheckFailedAndNoOther) {
  ASSERT_EQ(StateAndReason("node2").rfind("idle|", 0), 0u) << StateAndReason("node2");
  // The cluster file's own health check fails on node b, wherever it runs (node2 here).
  RunSlurmCommand({"sh", "-c", "echo ok >" + dir_ + "/scratch-a"}, "", 10000);
  std::ofstream(dir_ + "/cluster.yaml")
      << "transport: slurm\nslurm: {time: \"00:05:00\"}\n"
      << "nodes:\n  - {host: a, slots: 1}\n  - {host: b, slots: 1}\n"
      << "log_dir: " << dir_ << "/logs\n"
      << "health_checks:\n  - {name: scratch, run: 'test -f " << dir_
      << "/scratch-$DTRAIN_NODE || { echo \"no scratch on $DTRAIN_NODE\"; exit 1; }'}\n";
  const SlurmCommandResult run =
      RunSlurmCommand({kDtrain, "doctor", "-c", dir_ + "/cluster.yaml", "--drain"}, "", 90000);
  EXPECT_EQ(run.status, 1) << run.err;  // a check failed
  EXPECT_NE(run.err.find("dtrain doctor: drained Slurm node node2 (node b): dtrain doctor: node b: "
                         "health check 'scratch' failed (exit 1): no scratch on b; `scontrol "
                         "update NodeName=node2 State=RESUME` puts it back"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(run.err.find("node1"), std::string::npos) << run.err;
  // Drained once the doctor's own batch job has gone (draining while it still ends).
  std::string node2;
  for (int i = 0; i < 50; ++i) {
    node2 = StateAndReason("node2");
    if (node2.rfind("drained|", 0) == 0) break;
    usleep(200 * 1000);
  }
  EXPECT_EQ(node2,
            "drained|dtrain doctor: node b: health check 'scratch' failed (exit 1): no "
            "scratch on b");
  EXPECT_EQ(StateAndReason("node1").find("drain"), std::string::npos) << StateAndReason("node1");
  // As the doctor says, RESUME puts it back: a job of two nodes runs again.
  RunSlurmCommand({"scontrol", "update", "NodeName=node2", "State=RESUME"}, "", 10000);
  const SlurmCommandResult both = RunSlurmCommand(
      {"srun", "--nodes=2", "--time=1", "sh", "-c", "echo $SLURMD_NODENAME"}, "", 60000);
  EXPECT_EQ(both.status, 0) << both.err;
  EXPECT_NE(both.out.find("node2"), std::string::npos) << both.out << both.err;
}

TEST_F(DtrainDoctorOnSlurm, ANodeThatCannotBeDrainedIsSaidWithWhatToDo) {
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

TEST_F(DtrainDoctorOnSlurm, DrainIsForSlurmClustersOnly) {
  std::ofstream(dir_ + "/ssh.yaml") << "transport: ssh\nnodes: [{host: a}, {host: b}]\n";
  const SlurmCommandResult run =
      RunSlurmCommand({kDtrain, "doctor", "-c", dir_ + "/ssh.yaml", "--drain"}, "", 30000);
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_NE(run.err.find("--drain drains Slurm nodes, and this cluster's nodes are not Slurm's"),
            std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace dtrain
