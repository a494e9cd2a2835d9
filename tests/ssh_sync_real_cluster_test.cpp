// `dtrain sync` into private storage on namespace nodes (tests/cluster): a workdir at /srv/node
// on every node, nothing shared with the launching machine. What a second sync sends, symbolic
// links, a node whose link goes down mid-copy or mid-listing, staging folders a dead sync left,
// and a sync that must hash files touched here.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/cpu_cgroup.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/shell_run.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

using testing::Shell;
using testing::ShellOutput;

// The cluster file with `workdir:` (and what the test adds) on the generated nodes.
std::string WithWorkdir(const SshTestCluster& cluster, const std::string& workdir) {
  const std::string path = cluster.dir() + "/workdir.yaml";
  std::ofstream(path) << ReadText(cluster.cluster_file()) << "workdir: " << workdir << "\n";
  return path;
}

void WriteFile(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

// Counts per node in the sync summary: "N file(s)" sent and "N deleted", for every node.
bool EveryNodeSays(const std::string& out, int nodes, const std::string& what) {
  for (int i = 0; i < nodes; ++i) {
    const std::string line = "sync node" + std::to_string(i) + " (";
    const size_t at = out.find(line);
    if (at == std::string::npos) return false;
    const std::string rest = out.substr(at, out.find('\n', at) - at);
    if (rest.find(what) == std::string::npos) return false;
  }
  return true;
}

// The folder to sync: `files` (path below it -> contents) under the cluster's scratch folder.
std::string SourceTree(const SshTestCluster& cluster,
                       const std::map<std::string, std::string>& files) {
  const std::string src = cluster.dir() + "/src";
  for (const auto& [path, text] : files) WriteFile(src + "/" + path, text);
  return src;
}

// launch --sync into private /srv/node/work on 3 nodes: a Python rank imports the synced
// package through PYTHONPATH; a second sync sends nothing, a changed file is the only one sent,
// a deleted file disappears, ignored files never arrive, and a shared folder is skipped.
TEST(RealClusterSsh, SyncIntoPrivateWorkdirs) {
  SshTestCluster cluster("rc-sync", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string src = SourceTree(cluster, {{"syncpkg/__init__.py", "VALUE = 'one'\n"},
                                               {"syncpkg/extra.py", "X = 1\n"},
                                               {".gitignore", "ignored/\n"},
                                               {"ignored/big.bin", "no"},
                                               {".dtrainignore", "*.tmp\n"},
                                               {"scratch.tmp", "no"}});
  const std::string file = WithWorkdir(cluster, "/srv/node/work");
  const std::string logs = cluster.dir() + "/logs";
  const std::string in_src = "cd " + src + " && ";
  const std::string python = " python3 -c 'import syncpkg; print(syncpkg.VALUE)'";
  ShellOutput r = Shell(in_src + kDtrain + " launch --sync -c " + file + " --log-dir " + logs +
                        " --job one -q" + python + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 3, ": 4 file(s)")) << r.out;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(ReadText(logs + "/one/rank-" + std::to_string(rank) + ".log"), "one\n");
  }
  EXPECT_EQ(cluster.OnNode(2, "ls -A /srv/node/work | grep -v '^.dtrain-sync-manifest$'"),
            ".dtrainignore\n.gitignore\nsyncpkg\n");
  EXPECT_FALSE(fs::exists("/srv/node/work/syncpkg"))
      << "the launcher's own /srv/node is not a node's";

  r = Shell(in_src + kDtrain + " sync -c " + file + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 3, ": 0 file(s), 0.0 MB sent, 0 deleted")) << r.out;

  const std::string init = src + "/syncpkg/__init__.py";
  WriteFile(init, "VALUE = 'two!'\n");
  Shell("touch -d @1700000000.1 " + init);
  r = Shell(in_src + kDtrain + " sync -c " + file + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 3, ": 1 file(s)")) << r.out;
  r = Shell(in_src + kDtrain + " launch -c " + file + " --log-dir " + logs + " --job two -q" +
            python + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(ReadText(logs + "/two/rank-1.log"), "two!\n");

  // Edited again within the same second, to the same size: only the nanoseconds differ.
  WriteFile(init, "VALUE = 'six!'\n");
  Shell("touch -d @1700000000.9 " + init);
  r = Shell(in_src + kDtrain + " launch --sync -c " + file + " --log-dir " + logs +
            " --job six -q" + python + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 3, ": 1 file(s)")) << r.out;
  EXPECT_EQ(ReadText(logs + "/six/rank-2.log"), "six!\n");

  fs::remove(src + "/syncpkg/extra.py");
  r = Shell(in_src + kDtrain + " sync -c " + file + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 3, ": 0 file(s), 0.0 MB sent, 1 deleted")) << r.out;
  for (int node = 0; node < 3; ++node) {
    EXPECT_EQ(cluster.OnNode(node, "cd /srv/node/work/syncpkg && ls -d *.py"), "__init__.py\n");
  }

  // The nodes see this machine's files outside /srv/node: syncing src into itself is skipped.
  const std::string shared = WithWorkdir(cluster, src);
  r = Shell(in_src + kDtrain + " sync -c " + shared + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 3, "shares " + src + " with this machine")) << r.out;
}

// Symbolic links arrive as links with their targets as written (as `rsync -a` copies them), into
// a new folder and into an existing one; an unchanged link is not sent again, a retargeted one is,
// a removed one disappears.
TEST(RealClusterSsh, SyncCopiesSymlinksAsLinks) {
  SshTestCluster cluster("rc-links", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string src = SourceTree(cluster, {{"pkg/a.py", "A = 1\n"}, {"pkg/b.py", "B = 2\n"}});
  fs::create_symlink("a.py", src + "/pkg/current.py");
  fs::create_directory_symlink("pkg", src + "/lib");
  fs::create_symlink("/etc/hostname", src + "/host");
  const std::string long_target(150, 'x');
  fs::create_symlink(long_target, src + "/dangling-long");
  const std::string file = WithWorkdir(cluster, "/srv/node/links");
  const std::string in_src = "cd " + src + " && ";
  const std::string links =
      "cd /srv/node/links && for l in pkg/current.py lib host dangling-long; do "
      "printf '%s -> %s\\n' $l $(readlink $l); done; cat lib/current.py";
  ShellOutput r = Shell(in_src + kDtrain + " sync -c " + file + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 2, ": 6 file(s)")) << r.out;
  const std::string expected =
      "pkg/current.py -> a.py\nlib -> pkg\nhost -> /etc/hostname\n"
      "dangling-long -> " +
      long_target + "\nA = 1\n";
  for (int node = 0; node < 2; ++node) EXPECT_EQ(cluster.OnNode(node, links), expected);

  r = Shell(in_src + kDtrain + " sync -c " + file + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 2, ": 0 file(s), 0.0 MB sent, 0 deleted")) << r.out;

  fs::remove(src + "/pkg/current.py");
  fs::create_symlink("./b.py", src + "/pkg/current.py");  // another length: stat tells it apart
  fs::remove(src + "/host");
  r = Shell(in_src + kDtrain + " sync -c " + file + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(EveryNodeSays(r.out, 2, ": 1 file(s), 0.0 MB sent, 1 deleted")) << r.out;
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(cluster.OnNode(node,
                             "readlink /srv/node/links/pkg/current.py; "
                             "cat /srv/node/links/lib/current.py; ls /srv/node/links"),
              "./b.py\nB = 2\ndangling-long\nlib\npkg\n");
  }
}

// A node whose link goes down in the middle of a sync (node1: its side of the bridge at 2 Mbit/s
// with tc, so 8 MiB takes half a minute, then `ip link set eth0 down` inside it) is named lost
// once job.node_timeout has passed, and holds up no other: node0's copy ends as fast as it would
// alone. Before, dtrain's one poll loop blocked in a send() to node1 that could never complete,
// and the sync hung (node0 with it) until killed. On node1, with its link still down, the tar
// receiving the copy and the heartbeat's echo end by themselves and the partial copy goes: no
// EOF ever reaches them, and before they stayed until TCP keepalive ended the connection.
TEST(RealClusterSsh, SyncToANodeWhoseLinkGoesDownNamesItAndHoldsUpNoOther) {
  SshTestCluster cluster("rc-sync-down", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string src = cluster.dir() + "/src";
  fs::create_directories(src);
  ASSERT_EQ(std::system(("head -c 8388608 /dev/urandom > " + src + "/weights.bin").c_str()), 0);
  const std::string file = cluster.dir() + "/down.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file())
                      << "workdir: /srv/node/work\njob: {node_timeout: 4}\n";
  const std::string tbf = " root tbf rate 2mbit burst 32kbit latency 400ms 2>&1; echo rc=$?";
  const std::string slowed = RunOutput("tc qdisc add dev nd1" + tbf);
  ASSERT_NE(slowed.find("rc=0"), std::string::npos) << slowed;
  testing::DtrainProcess sync({"sync", "-c", file}, src);
  ASSERT_TRUE(testing::WaitFor(
      [&] { return !cluster.NodeProcessesWith(1, "tar -xf - -C /srv/node/work").empty(); }, 20))
      << sync.err();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(cluster.OnNode(1, "ip link set eth0 down 2>&1"), "");
  const auto down = std::chrono::steady_clock::now();
  ASSERT_GE(sync.Wait(30), 0) << sync.err();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - down).count();
  const auto left_on_node1 = [&] {
    std::string out;
    for (const std::string& p : cluster.NodeProcessesBesidesSshd(1)) out += p + "\n";
    return out + cluster.OnNode(1, "ls -d /srv/node/work* 2>/dev/null");
  };
  EXPECT_TRUE(testing::WaitFor([&] { return left_on_node1().empty(); }, 8)) << left_on_node1();
  cluster.OnNode(1, "ip link set eth0 up");
  RunOutput("tc qdisc del dev nd1 root");
  EXPECT_EQ(sync.exit_status().code, 1) << sync.err();
  EXPECT_LT(took, 4 + 5) << "job.node_timeout, and room" << sync.err();
  const std::string err = sync.err();
  EXPECT_THAT(err, HasSubstr("dtrain: sync node1 (" + cluster.Field(1, 1) +
                             "): FAILED: node node1 lost: no answer for 4 s"));
  // node0's copy took what it takes alone (a fraction of a second here), not node1's pace.
  // (dtrain's own output files, in the folder synced, go too)
  const size_t at = err.find("dtrain: sync node0 (" + cluster.Field(0, 1) + "): ");
  ASSERT_NE(at, std::string::npos) << err;
  const std::string line = err.substr(at, err.find('\n', at) - at);
  EXPECT_THAT(line, HasSubstr(" file(s), 8.4 MB sent"));
  const double seconds = std::stod(line.substr(line.rfind('(') + 1));
  EXPECT_LT(seconds, 5) << line;
  EXPECT_EQ(
      cluster.OnNode(0, "cmp /srv/node/work/weights.bin " + src + "/weights.bin && echo same"),
      "same\n");
}

// A node whose link goes down while it sends the listing of a large workdir (node1: 20,000
// files whose long names make a 4.4 MB listing, more than sshd's channel window and the pipe
// hold, sent over its link held to 1 Mbit/s by tc inside it) is named lost, and with the link
// still down what wrote the listing ends by itself: before, `find` waited on a channel whose
// other end was gone until TCP keepalive ended the connection, hours later.
TEST(RealClusterSsh, ANodeCutOffWhileItListsItsWorkdirKeepsNothingOfTheSync) {
  SshTestCluster cluster("rc-sync-list", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string src = cluster.dir() + "/src";
  fs::create_directories(src);
  std::ofstream(src + "/train.py") << "print(1)\n";
  const std::string file = cluster.dir() + "/list.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file())
                      << "workdir: /srv/node/work\njob: {node_timeout: 3}\n";
  EXPECT_EQ(cluster.OnNode(1,
                           "mkdir -p /srv/node/work && cd /srv/node/work && seq 1 20000 | "
                           "sed 's/$/-" +
                               std::string(200, 'x') + "/' | xargs touch && ls | wc -l"),
            "20000\n");
  const std::string slowed = cluster.OnNode(
      1, "tc qdisc add dev eth0 root tbf rate 1mbit burst 32kbit latency 400ms 2>&1; echo rc=$?");
  ASSERT_NE(slowed.find("rc=0"), std::string::npos) << slowed;
  testing::DtrainProcess sync({"sync", "-c", file}, src);
  const std::string lister = "find . -name .dtrain-sync* -prune";
  ASSERT_TRUE(testing::WaitFor([&] { return !cluster.NodeProcessesWith(1, lister).empty(); }, 20))
      << sync.err();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_FALSE(cluster.NodeProcessesWith(1, lister).empty()) << "the listing went through";
  EXPECT_EQ(cluster.OnNode(1, "ip link set eth0 down 2>&1"), "");
  ASSERT_GE(sync.Wait(30), 0) << sync.err();
  const auto left_on_node1 = [&] {
    std::string out;
    for (const std::string& p : cluster.NodeProcessesBesidesSshd(1)) out += p.substr(0, 120) + "\n";
    return out;
  };
  EXPECT_TRUE(testing::WaitFor([&] { return left_on_node1().empty(); }, 10)) << left_on_node1();
  cluster.OnNode(1, "ip link set eth0 up; tc qdisc del dev eth0 root");
  EXPECT_EQ(sync.exit_status().code, 1) << sync.err();
  EXPECT_THAT(sync.err(), HasSubstr("FAILED: node node1 lost: no answer for 3 s"));
  EXPECT_EQ(cluster.OnNode(0, "cat /srv/node/work/train.py"), "print(1)\n");
}

// A node that died mid-copy (rebooted: nothing ran the copy's cleanup) keeps its staging
// folder, which no later listing showed: the next sync removes such folders, inside the workdir
// and beside one not made yet, but not one that a process there still names (another sync to
// the same folder, under way).
TEST(RealClusterSsh, StagingFoldersOfADeadSyncGoAndThoseOfALiveOneStay) {
  SshTestCluster cluster("rc-sync-stale", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string src = cluster.dir() + "/src";
  fs::create_directories(src);
  std::ofstream(src + "/train.py") << "print(1)\n";
  const std::string live = ".dtrain-sync-stage.999993";
  cluster.OnNode(0,
                 "mkdir -p /srv/node/work/.dtrain-sync-stage.999991/sub "
                 "/srv/node/work/" +
                     live + " && touch /srv/node/work/.dtrain-sync-stage.999991.err");
  cluster.OnNode(0, "nohup sh -c 'sleep 120; :' dtrain-sync /srv/node/work probe " + live +
                        " >/dev/null 2>&1 &");
  cluster.OnNode(1,
                 "rm -rf /srv/node/work && mkdir -p /srv/node/work.dtrain-sync-stage.999992/sub");
  const std::string file = cluster.dir() + "/stale.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file()) << "workdir: /srv/node/work\n";
  const ShellOutput r = Shell("cd " + src + " && " + kDtrain + " sync -c " + file + " 2>&1");
  cluster.OnNode(0, "pkill -f 'dtrain-sync-stage.999993'");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(cluster.OnNode(0, "cd /srv/node/work && ls -a | grep dtrain-sync-stage"), live + "\n");
  EXPECT_EQ(cluster.OnNode(1, "ls -d /srv/node/work*"), "/srv/node/work\n");
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(cluster.OnNode(node, "cat /srv/node/work/train.py"), "print(1)\n");
  }
}

// A sync that must hash what was touched here (a 512 MiB file whose time changed, not its bytes)
// goes on feeding every node's watch while it hashes: dtrain held to a tenth of a CPU hashes for
// seconds, past job.node_timeout (2 s). Before, it hashed on the poll loop's thread, no heartbeat
// went out meanwhile, and both nodes were named lost once it was done.
TEST(RealClusterSsh, HashingFilesTouchedHereLosesNoNode) {
  SshTestCluster cluster("rc-sync-hash", 2, 1);
  REQUIRE_CLUSTER(cluster);
  testing::CpuCgroup slow("dtrain-sync-hash-" + std::to_string(::getpid()), 0.1);
  if (!slow.error().empty()) GTEST_SKIP() << slow.error();
  const std::string src = cluster.dir() + "/src";
  fs::create_directories(src);
  ASSERT_EQ(std::system(("head -c 536870912 /dev/zero > " + src + "/weights.bin").c_str()), 0);
  // The file is first put on the nodes with the default node timeout: that sync pushes 1 GB
  // through two sshds on the same two cores, and under ASan beside another test it was held up
  // for 2.2 s once; it is not what this test is about.
  const std::string setup = cluster.dir() + "/hash-setup.yaml";
  std::ofstream(setup) << ReadText(cluster.cluster_file()) << "workdir: /srv/node/work\n";
  const ShellOutput first = Shell("cd " + src + " && " + kDtrain + " sync -c " + setup + " 2>&1");
  ASSERT_EQ(first.status, 0) << first.out;
  const std::string file = cluster.dir() + "/hash.yaml";
  std::ofstream(file) << ReadText(cluster.cluster_file())
                      << "workdir: /srv/node/work\njob: {node_timeout: 2}\n";
  ASSERT_EQ(std::system(("touch -m -d '2020-01-02 03:04:05' " + src + "/weights.bin").c_str()), 0);
  const auto start = std::chrono::steady_clock::now();
  testing::DtrainProcess sync({"sync", "-c", file}, src);
  ASSERT_TRUE(slow.Move(std::to_string(sync.pid())));
  ASSERT_GE(sync.Wait(120), 0) << sync.err();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(sync.exit_status().code, 0) << sync.err();
  EXPECT_THAT(sync.err(), Not(HasSubstr("lost")));
  // (its own output files, new in the folder synced, go; the big one does not)
  EXPECT_TRUE(EveryNodeSays(sync.err(), 2, " file(s), 0.0 MB sent, 0 deleted, 1 unchanged"))
      << sync.err();
  EXPECT_GT(took, 2 + 1) << "the hash took less than the node timeout: this proves nothing";
  std::printf("the sync that hashed 512 MiB took %.1f s\n", took);
}

}  // namespace
}  // namespace dtrain
