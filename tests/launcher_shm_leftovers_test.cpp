// Shared memory segments that processes killed outright leave in a node's /dev/shm, on real sshd
// nodes in network namespaces, each node's /dev/shm a tmpfs of its own (mounted in its mount
// namespace), the segments made by real Python processes (multiprocessing.shared_memory): a rank
// end removes its ranks' (launcher/shm_leftovers.h), and a node whose /dev/shm such leftovers fill
// is left out at the start (the doctor's shm-leftovers check).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/files.h"
#include "tests/support/launch_run.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/shm_segment.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using nlohmann::json;
using test::ReadText;
using test::SshTestCluster;

// Node i's /dev/shm as a tmpfs of `size` of its own, for the scope of a test; the namespace goes
// with the cluster, the mount with it.
void PrivateShm(const SshTestCluster& cluster, int i, const std::string& size) {
  const std::string out =
      cluster.OnNode(i, "mount -t tmpfs -o size=" + size + " node-shm /dev/shm && echo mounted");
  ASSERT_NE(out.find("mounted"), std::string::npos) << out;
}

// Rank 1 kills its process group once its segment is made, the job stops, and rank 0, which
// sleeps through SIGTERM, is killed with its resource tracker after the 1 s grace period: both
// leave their segment. Each rank's end removes it from its node and says so in the rank's log.
TEST(ShmLeftovers, SegmentsOfRanksKilledOutrightAreRemovedFromTheirNodes) {
  SshTestCluster cluster("shm-rank-end", 2, 1);
  REQUIRE_CLUSTER(cluster);
  PrivateShm(cluster, 0, "256m");
  PrivateShm(cluster, 1, "256m");
  const std::string dir = testing::ScratchDirs::Make("shm-rank-end");
  testing::WriteFile(dir + "/segment.py", test::kShmSegmentScript);
  const std::string logs = test::FreshPrivateFolder("shm-rank-end");
  const test::LaunchRun r = test::RunToTheEnd(
      {"launch", "-c", cluster.cluster_file(), "--job", "shm", "--log-dir", logs, "--grace-period",
       "1", "--quiet", "--", "sh", "-c",
       "if [ \"$RANK\" = 1 ]; then w='kill 1'; else w=ignore-term; fi; exec python3 " + dir +
           "/segment.py psm_dtrain_rank$RANK 32 $w"},
      logs, "shm", 60);
  EXPECT_NE(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("rank 1 on node node1 failed: killed by SIGKILL"), std::string::npos)
      << r.err;
  for (int i = 0; i < 2; ++i) {
    const std::string log = ReadText(logs + "/shm/rank-" + std::to_string(i) + ".log");
    EXPECT_NE(log.find("made psm_dtrain_rank" + std::to_string(i)), std::string::npos) << log;
    EXPECT_NE(log.find("dtrain: node" + std::to_string(i) +
                       ": removed 1 shared memory segment(s) that processes killed outright "
                       "left in /dev/shm (32 MiB: psm_dtrain_rank" +
                       std::to_string(i) + "); no process held them"),
              std::string::npos)
        << "rank " << i << "'s log:\n"
        << log;
    EXPECT_EQ(cluster.OnNode(i, "ls /dev/shm | grep psm_ || echo none"), "none\n") << "node" << i;
  }
}

// Node1's /dev/shm (600 MiB) is full of a segment a process killed outright left (560 MiB): the
// check before the start finds it, the spare takes node1's place, and `dtrain doctor` names it.
TEST(ShmLeftovers, NodeWhoseSharedMemoryIsFullOfLeftoversIsReplacedByTheSpareAtTheStart) {
  SshTestCluster cluster("shm-start", 4, 1);
  REQUIRE_CLUSTER(cluster);
  PrivateShm(cluster, 1, "600m");
  const std::string dir = testing::ScratchDirs::Make("shm-start");
  testing::WriteFile(dir + "/segment.py", test::kShmSegmentScript);
  const std::string made = cluster.OnNode(
      1, "setsid --wait python3 " + dir + "/segment.py psm_old_job 560 kill; ls /dev/shm");
  ASSERT_NE(made.find("psm_old_job"), std::string::npos) << made;

  const std::string logs = test::FreshPrivateFolder("shm-start");
  const test::LaunchRun r = test::RunToTheEnd(
      {"launch", "-c", cluster.cluster_file(), "--job", "start", "--log-dir", logs, "--spares", "1",
       "--", "sh", "-c", "echo \"rank $RANK on $DTRAIN_NODE\""},
      logs, "start", 60);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("dtrain: node node1 quarantined in job start: failed the health check "
                       "before start: node node1: /dev/shm is nearly full ("),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("560 MiB of it is 1 shared memory segment(s) no process holds: "
                       "psm_old_job (560 MiB, root, "),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(r.record.is_object()) << r.err;
  ASSERT_EQ(r.record["attempts"].size(), 1u) << r.record.dump(2);
  EXPECT_EQ(r.record["attempts"][0]["nodes"], json({"node0", "node2", "node3"}));

  testing::DtrainProcess doctor({"doctor", "-c", cluster.cluster_file()}, dir);
  const int status = doctor.Wait(60);
  EXPECT_EQ(status, 1) << doctor.out() << doctor.err();
  EXPECT_NE(doctor.out().find("error   node node1: /dev/shm is nearly full ("), std::string::npos)
      << doctor.out();
  EXPECT_NE(doctor.out().find("(rm /dev/shm/psm_old_job)"), std::string::npos) << doctor.out();
}

}  // namespace
}  // namespace dtrain
