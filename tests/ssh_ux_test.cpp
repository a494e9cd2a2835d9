// torchrun/horovodrun habits over SSH, on namespace nodes (tests/cluster): -x values reaching every
// node byte for byte, -H and --hostfile instead of a cluster file, dtrain-clip found where the
// doctor finds it, rank stderr on dtrain's stderr and 127 for a command not found.
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/shell_run.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

using testing::ShellOutput;
using testing::ShellStdout;

// A HOME with the cluster's client key and known_hosts where OpenSSH users keep them, so -H and
// --hostfile run with no cluster file at all.
std::string MakeHome(const SshTestCluster& cluster) {
  const std::string home = cluster.dir() + "/home";
  RunOutput("mkdir -p " + home + "/.ssh && cp " + cluster.dir() + "/id_ed25519 " + cluster.dir() +
            "/known_hosts " + home + "/.ssh/ && chmod 600 " + home + "/.ssh/id_ed25519");
  return home;
}

// 9. -x NAME (the caller's value) and -x NAME=VALUE reach every SSH rank byte for byte.
TEST(SshUx, PassedEnvironmentReachesEveryNodeByteForByte) {
  SshTestCluster cluster("ux16-x", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string canary = cluster.dir() + "/pwned";
  const std::string tricky = "it's \"$(touch " + canary + ")\" `touch " + canary + "`; a\tb\nc";
  ::setenv("UX16_TRICKY", tricky.c_str(), 1);
  const std::string logs = cluster.dir() + "/logs";
  const ShellOutput r = ShellStdout(
      kDtrain + " launch -c " + cluster.cluster_file() + " --log-dir " + logs +
      " --job x -q -x UX16_TRICKY -x 'UX16_SET=x=1 $HOME' printf '%s|%s' " + "'$UX16_TRICKY' 2>&1");
  ::unsetenv("UX16_TRICKY");
  ASSERT_EQ(r.status, 0) << r.out;
  // printf's format is the literal word $UX16_TRICKY: nothing was expanded on the way either.
  EXPECT_EQ(ReadText(logs + "/x/rank-0.log"), "$UX16_TRICKY|");
  const ShellOutput env =
      ShellStdout(kDtrain + " launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                  " --job env -q -x UX16_SET='x=1 $HOME' -x UX16_TRICKY=\"$(printf 'a\\tb')\" " +
                  "sh -c 'printf %s \"$UX16_SET|$UX16_TRICKY|$(hostname)\"' 2>&1");
  ASSERT_EQ(env.status, 0) << env.out;
  EXPECT_EQ(ReadText(logs + "/env/rank-0.log"), "x=1 $HOME|a\tb|node0");
  EXPECT_EQ(ReadText(logs + "/env/rank-1.log"), "x=1 $HOME|a\tb|node1");
  ::setenv("UX16_TRICKY", tricky.c_str(), 1);
  const ShellOutput own =
      ShellStdout(kDtrain + " launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                  " --job own -q -x UX16_TRICKY sh -c 'printf %s \"$UX16_TRICKY\"' 2>&1");
  ::unsetenv("UX16_TRICKY");
  ASSERT_EQ(own.status, 0) << own.out;
  EXPECT_EQ(ReadText(logs + "/own/rank-1.log"), tricky);
  struct stat st;
  EXPECT_NE(::stat(canary.c_str(), &st), 0) << "a value was run as shell code";
}

// 9. -H host:slots and a DeepSpeed/MPI hostfile, with -np, instead of a cluster file.
TEST(SshUx, HostListAndHostfileRunOnTheNodes) {
  SshTestCluster cluster("ux16-h", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string home = MakeHome(cluster);
  const std::string a = cluster.Field(0, 1), b = cluster.Field(1, 1);
  const std::string logs = cluster.dir() + "/logs";
  const std::string env = "cd " + cluster.dir() + " && HOME=" + home + " ";
  ShellOutput r = ShellStdout(env + kDtrain + " launch -H " + a + ":2," + b + " --log-dir " + logs +
                              " --job h -q hostname 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("3 rank(s) on 2 node(s) (ssh)"));
  EXPECT_THAT(r.out, HasSubstr("-H " + a + ":2," + b));
  EXPECT_EQ(ReadText(logs + "/h/rank-0.log"), "node0\n");
  EXPECT_EQ(ReadText(logs + "/h/rank-1.log"), "node0\n");
  EXPECT_EQ(ReadText(logs + "/h/rank-2.log"), "node1\n");

  std::ofstream(cluster.dir() + "/hostfile") << "# DeepSpeed hostfile\n"
                                             << a << " slots=1\n"
                                             << b << " slots=2\n";
  r = ShellStdout(env + kDtrain + " launch --hostfile hostfile -np 2 --log-dir " + logs +
                  " --job hf -q sh -c 'echo $(hostname) $RANK/$WORLD_SIZE $LOCAL_WORLD_SIZE' 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(ReadText(logs + "/hf/rank-0.log"), "node0 0/2 1\n");
  EXPECT_EQ(ReadText(logs + "/hf/rank-1.log"), "node1 1/2 1\n");

  // horovodrun's -p and -i: a HOME whose ~/.ssh holds no key reaches the nodes with -i alone,
  // and -p is the port tried (sshd listens on 22, not 2).
  const std::string keyless = cluster.dir() + "/keyless";
  RunOutput("mkdir -p " + keyless + "/.ssh && cp " + cluster.dir() + "/known_hosts " + keyless +
            "/.ssh/");
  const std::string bare = "cd " + cluster.dir() + " && env -u SSH_AUTH_SOCK HOME=" + keyless + " ";
  r = ShellStdout(bare + kDtrain + " launch -H " + a + "," + b + " --log-dir " + logs +
                  " --job nokey -q hostname 2>&1");
  EXPECT_NE(r.status, 0) << r.out;  // no key: refused
  r = ShellStdout(bare + kDtrain + " launch -H " + a + "," + b + " -p 22 -i " + cluster.dir() +
                  "/id_ed25519 --log-dir " + logs + " --job key -q hostname 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(ReadText(logs + "/key/rank-1.log"), "node1\n");
  r = ShellStdout(bare + kDtrain + " launch -H " + a + " -p 2 -i " + cluster.dir() +
                  "/id_ed25519 --log-dir " + logs + " --job port -q hostname 2>&1");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("cannot connect to port 2:")) << r.out;
}

// torchrun's --nproc-per-node gpu|auto|cpu on ssh nodes without a gpus: list: each node is asked
// (the doctor's probe), as torchrun counts on the node it runs on. node0 has an 8-GPU
// nvidia-smi stand-in first on its PATH; node1 has no GPU, so auto gives it one rank per CPU and
// gpu is refused naming it.
TEST(SshUx, NprocPerNodeGpuAsksEachNodeForItsGpus) {
  SshTestCluster cluster("ux16-g", 2, 1);
  REQUIRE_CLUSTER(cluster);
  test::WriteStandIns(cluster.dir() + "/node0-bin", test::HgxQuery(), "");
  const std::string file = test::StandInClusterFile(cluster, 1, "", "gpus.yaml");
  const std::string cpus = RunOutput("nproc | tr -d '\\n'");
  const std::string logs = cluster.dir() + "/logs";
  const std::string launch = "cd " + cluster.dir() + " && " + kDtrain + " launch -c " + file +
                             " --start-health-check off --health-watch 0 --log-dir " + logs;
  ShellOutput r =
      ShellStdout(launch + " --nproc-per-node auto --job auto -q sh -c 'echo $(hostname) " +
                  "$LOCAL_WORLD_SIZE $WORLD_SIZE' 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("ranks: 8," + cpus +
                               " per node (--nproc-per-node auto, asked on "
                               "the nodes)"));
  const std::string world = std::to_string(8 + std::stoi(cpus));
  EXPECT_EQ(ReadText(logs + "/auto/rank-7.log"), "node0 8 " + world + "\n");
  EXPECT_EQ(ReadText(logs + "/auto/rank-8.log"), "node1 " + cpus + " " + world + "\n");
  r = ShellStdout(launch + " --nproc-per-node gpu --job gpu -q true 2>&1");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no GPU on node node1 (nvidia-smi lists none there)"));
  r = ShellStdout(launch + " --nproc-per-node cpu -np 2 --job cpu -q true 2>&1");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("-np 2 filling --nproc-per-node cpu, asked on the nodes"));
}

// 3. dtrain-clip (and dtrain) beside the launching dtrain are found on the nodes exactly where
// the doctor finds them, though that folder is not on the nodes' PATH.
TEST(SshUx, LaunchRunsTheDtrainClipTheDoctorReports) {
  SshTestCluster cluster("ux16-clip", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string bin = cluster.dir() + "/bin";
  RunOutput("mkdir -p " + bin + " && cp " + kDtrain + " " + bin + "/dtrain");
  std::ofstream(bin + "/dtrain-clip") << "#!/bin/sh\necho \"dtrain-clip 0.1.0 $0 $*\"\n";
  ::chmod((bin + "/dtrain-clip").c_str(), 0755);
  const std::string logs = cluster.dir() + "/logs";
  const ShellOutput launch =
      ShellStdout(bin + "/dtrain launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                  " --job clip -q dtrain-clip --version 2>&1");
  ASSERT_EQ(launch.status, 0) << launch.out;
  EXPECT_EQ(ReadText(logs + "/clip/rank-1.log"),
            "dtrain-clip 0.1.0 " + bin + "/dtrain-clip --version\n");
  const ShellOutput self =
      ShellStdout(bin + "/dtrain launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                  " --job self -q dtrain --version 2>&1");
  ASSERT_EQ(self.status, 0) << self.out;
  EXPECT_THAT(ReadText(logs + "/self/rank-0.log"), HasSubstr("dtrain "));

  const ShellOutput doctor = ShellStdout(bin + "/dtrain doctor -c " + cluster.cluster_file() +
                                         " --json --timeout 30 2>/dev/null");
  const nlohmann::json doc = nlohmann::json::parse(doctor.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << doctor.out;
  for (const auto& node : doc["nodes"]) {
    EXPECT_EQ(node["facts"]["clip_path"], bin + "/dtrain-clip") << node.dump();
  }
}

// torchrun's --numa-binding on ssh nodes: the binding runs on each node, and dtrain-clip given
// by bare name is still found beside the launching dtrain. An nvidia-smi stand-in on the ranks'
// PATH and a sysfs stand-in put GPU 0 on NUMA node 0, whose one CPU is CPU 0.
TEST(SshUx, NumaBindingRunsOnTheNodesAndFindsDtrainClip) {
  SshTestCluster cluster("ux16-numa", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string bin = cluster.dir() + "/bin";
  const std::string smi = cluster.dir() + "/smi";
  const std::string sys = cluster.dir() + "/sys";
  RunOutput("mkdir -p " + bin + " " + smi + " " + sys + "/bus/pci/devices/0000:17:00.0 " + sys +
            "/devices/system/node/node0 && cp " + kDtrain + " " + bin + "/dtrain && echo 0 >" +
            sys + "/bus/pci/devices/0000:17:00.0/numa_node && echo 0 >" + sys +
            "/devices/system/node/node0/cpulist");
  std::ofstream(bin + "/dtrain-clip") << "#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status\n";
  std::ofstream(smi + "/nvidia-smi") << "#!/bin/sh\necho 00000000:17:00.0\n";
  ::chmod((bin + "/dtrain-clip").c_str(), 0755);
  ::chmod((smi + "/nvidia-smi").c_str(), 0755);
  const std::string logs = cluster.dir() + "/logs";
  const ShellOutput launch =
      ShellStdout(bin + "/dtrain launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                  " --job numa -q --numa-binding node -x PATH=" + smi + ":/usr/bin:/bin -x " +
                  "DTRAIN_PROBE_SYSFS=" + sys + " dtrain-clip 2>&1");
  ASSERT_EQ(launch.status, 0) << launch.out;
  for (int r = 0; r < 2; ++r) {
    // The note comes on stderr, the program's line on stdout: two streams of one ssh channel,
    // whose order against each other is the order they were read in.
    const std::string note = "dtrain: rank " + std::to_string(r) +
                             ": --numa-binding node: GPU 0 (0000:17:00.0) on NUMA node 0: CPUs 0\n";
    const std::string bound = "Cpus_allowed_list:\t0\n";
    const std::string log = ReadText(logs + "/numa/rank-" + std::to_string(r) + ".log");
    EXPECT_TRUE(log == note + bound || log == bound + note) << log;
  }
}

// 10. Over SSH too: rank stderr on dtrain's stderr, stdout on its stdout; not found is 127.
TEST(SshUx, StderrApartAndCommandNotFoundIs127) {
  SshTestCluster cluster("ux16-err", 1, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  const std::string err = cluster.dir() + "/err.txt";
  const ShellOutput r =
      ShellStdout(kDtrain + " launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                  " --job s sh -c 'echo out; echo Traceback >&2' 2>" + err);
  ASSERT_EQ(r.status, 0) << r.out << ReadText(err);
  EXPECT_EQ(r.out, "[node0:0] out\n");
  EXPECT_THAT(ReadText(err), HasSubstr("[node0:0] Traceback\n"));
  const std::string log = ReadText(logs + "/s/rank-0.log");
  EXPECT_THAT(log, HasSubstr("out\n"));
  EXPECT_THAT(log, HasSubstr("Traceback\n"));
  const ShellOutput missing =
      ShellStdout(kDtrain + " launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                  " --job nf no-such-program-16 2>&1");
  EXPECT_EQ(missing.status, 127) << missing.out;
  EXPECT_THAT(missing.out, HasSubstr("'no-such-program-16': command not found"));
}

}  // namespace
}  // namespace dtrain
