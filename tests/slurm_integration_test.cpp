// The Slurm transport against a real Slurm on this machine: tests/slurm/slurm-cluster.sh starts
// munged, slurmctld and one slurmd (this host) before the tests and stops them after. When Slurm
// cannot start, the tests fail as root (CI runs as root, where Slurm must work) and are skipped,
// saying why, otherwise (slurmd needs root).
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "launcher/error.h"
#include "launcher/slurm/slurm_allocation.h"
#include "launcher/slurm/slurm_child.h"
#include "launcher/transport.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"
#include "tests/support/free_port.h"
#include "tests/support/hanging_torch.h"
#include "tests/support/transport_recorder.h"

namespace dtrain {
namespace {

const std::string kClusterScript = std::string(DTRAIN_SOURCE_DIR) + "/tests/slurm/slurm-cluster.sh";
std::string g_start_failure;  // set when the cluster could not start

// Starts the cluster once for the whole set; stops it at the end.
class SlurmCluster : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("DTRAIN_SLURM_DIR", "/tmp/dtrain-slurm-test", 0);
    setenv("DTRAIN_SLURM_PORT", "16837", 0);
    const SlurmCommandResult started = RunSlurmCommand({kClusterScript, "start"}, "", 60000);
    const std::string prefix = "export SLURM_CONF=";
    const size_t at = started.out.find(prefix);
    if (started.status != 0 || at == std::string::npos) {
      g_start_failure = "Slurm could not be started here: " + started.Describe();
      if (geteuid() != 0) {
        std::printf("SLURM UNAVAILABLE: %s\n", g_start_failure.c_str());  // ctest: skipped
      }
      return;
    }
    std::string conf = started.out.substr(at + prefix.size());
    conf = conf.substr(0, conf.find('\n'));
    setenv("SLURM_CONF", conf.c_str(), 1);
    unsetenv("SLURM_JOB_ID");
    unsetenv("SLURM_JOB_NODELIST");
    started_ = true;
  }
  void TearDown() override {
    if (started_) RunSlurmCommand({kClusterScript, "stop"}, "", 60000);
  }

 private:
  bool started_ = false;
};

using Recorder = testing::TransportRecorder;

// `count` nodes with `slots` ranks each; the hosts are labels, Slurm picks node1, node2.
ClusterSpec SlurmSpec(int count, int slots) {
  ClusterSpec spec;
  spec.source = "slurm-test.yaml";
  spec.transport = TransportKind::kSlurm;
  for (int i = 0; i < count; ++i) {
    const std::string label = "label" + std::to_string(i);
    spec.nodes.push_back({label, label, slots, {}, {}});
  }
  spec.slurm.time = "00:05:00";
  return spec;
}

// A cluster placed on its own allocation: a batch job named dtrain-slurm-test, cancelled when
// the Placed goes (or the caller's allocation, when SLURM_JOB_ID is set).
struct Placed {
  SlurmAllocation allocation;
  ClusterSpec spec;
};
std::unique_ptr<Placed> Place(const ClusterSpec& spec) {
  auto placed = std::make_unique<Placed>();
  placed->spec = PlaceOnSlurm(spec, {"dtrain-slurm-test", ""}, placed->allocation);
  return placed;
}

// Ranks shaped as the rank plan makes them (node-major), with values a shell would mangle.
std::vector<ProcessSpec> Ranks(const ClusterSpec& spec, const std::vector<std::string>& argv) {
  std::vector<ProcessSpec> procs;
  int rank = 0;
  for (size_t node = 0; node < spec.nodes.size(); ++node) {
    for (int local = 0; local < spec.nodes[node].slots; ++local, ++rank) {
      ProcessSpec p;
      p.id = rank;
      p.node_index = static_cast<int>(node);
      p.argv = argv;
      p.env = {{"RANK", std::to_string(rank)},
               {"LOCAL_RANK", std::to_string(local)},
               {"MASTER_ADDR", spec.nodes[0].address},
               {"MASTER_PORT", "29500"},
               {"HOROVOD_HOSTNAME", spec.nodes[node].MachineName()},
               {"DTRAIN_JOB", "slurm-test"},
               {"TRICKY", "it's \"$(echo no)\" `x` $HOME\n\ttab"}};
      if (rank == 1) p.env["ONLY_ONE"] = "yes";
      p.python_path_head = "/head dir";
      procs.push_back(p);
    }
  }
  return procs;
}

std::string Squeue(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"squeue", "-h"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunSlurmCommand(argv, "", 10000).out;
}

// A batch job of its own holding both nodes (`tasks` per node) for two minutes: its id, or "".
std::string HoldNodes(int tasks, const std::string& name) {
  const SlurmCommandResult held = RunSlurmCommand(
      {"sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=" + std::to_string(tasks),
       "--job-name=" + name, "--output=/dev/null", "--wrap=sleep 120"},
      "", 10000);
  EXPECT_EQ(held.status, 0) << held.Describe();
  return held.status == 0 ? held.out.substr(0, held.out.find_first_of(";\n")) : "";
}

class SlurmTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (g_start_failure.empty()) return;
    if (geteuid() == 0) FAIL() << g_start_failure;
    GTEST_SKIP() << g_start_failure << " (not root)";
  }
};

const std::vector<std::string> kPrintEnv = {
    "sh", "-c",
    "printf 'rank=%s local=%s master=%s host=%s slurmd=%s only=%s\\n' \"$RANK\" \"$LOCAL_RANK\" "
    "\"$MASTER_ADDR\" \"$HOROVOD_HOSTNAME\" \"$SLURMD_NODENAME\" \"${ONLY_ONE-unset}\"; "
    "printf 'pythonpath=%s\\n' \"$PYTHONPATH\"; printf 'tricky=[%s]\\n' \"$TRICKY\"; "
    "env | grep -c -E '^DTRAIN_(SLURM_[0-9]|SLURM_VARY|SLURM_MARK|SLURM_NTASKS|PYTHONPATH_HEAD)' "
    "|| true; echo to-stderr >&2; printf 'no newline'"};

void ExpectRankEnvironment(const Recorder& events, int rank, int local, const std::string& node,
                           const std::string& old_pythonpath) {
  const std::string out = events.output.at(rank);
  EXPECT_NE(out.find("rank=" + std::to_string(rank) + " local=" + std::to_string(local) +
                     " master=127.0.0.1 host=" + node + " slurmd=" + node +
                     " only=" + (rank == 1 ? "yes" : "unset")),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("pythonpath=/head dir:" + old_pythonpath + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("tricky=[it's \"$(echo no)\" `x` $HOME\n\ttab]\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\n0\n"), std::string::npos) << "wrapper variables leaked: " << out;
  EXPECT_NE(out.find("to-stderr\n"), std::string::npos) << out;
  EXPECT_NE(out.find("no newline"), std::string::npos) << out;
  EXPECT_EQ(out.find("@dtrain-slurm-"), std::string::npos) << out;
}

TEST_F(SlurmTransportTest, BatchJobRunsRanksOnTwoNodesWithTheirEnvironment) {
  setenv("PYTHONPATH", "/old/path", 1);
  auto placed = Place(SlurmSpec(2, 2));
  const ClusterSpec& spec = placed->spec;
  auto transport = MakeTransport(spec);
  Recorder events;
  transport->Start(Ranks(spec, kPrintEnv), events);
  ASSERT_TRUE(events.RunToEnd(*transport, 60));
  for (int rank = 0; rank < 4; ++rank) {
    ASSERT_EQ(events.exit_calls[rank], 1);
    EXPECT_TRUE(events.exits[rank].ok()) << events.exits[rank].Describe();
    ExpectRankEnvironment(events, rank, rank % 2, rank < 2 ? "node1" : "node2", "/old/path");
  }
  transport.reset();
  placed.reset();  // cancels the batch job that held the allocation
  EXPECT_EQ(Squeue({"-n", "dtrain-slurm-test", "-t", "PD,R"}), "");
}

TEST_F(SlurmTransportTest, InsideAnAllocationRunsAStepInIt) {
  const std::string job = HoldNodes(1, "outer");
  ASSERT_NE(job, "");
  for (int i = 0; i < 50 && Squeue({"-j", job, "-o", "%T"}).rfind("RUNNING", 0) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::string nodelist = Squeue({"-j", job, "-o", "%N"});
  nodelist = nodelist.substr(0, nodelist.find('\n'));
  EXPECT_EQ(nodelist, "node[1-2]");
  setenv("SLURM_JOB_ID", job.c_str(), 1);
  setenv("SLURM_JOB_NODELIST", nodelist.c_str(), 1);
  Recorder events;
  {
    auto placed = Place(SlurmSpec(2, 1));
    const ClusterSpec& spec = placed->spec;
    auto transport = MakeTransport(spec);
    transport->Start(
        Ranks(spec, {"sh", "-c", "echo step $SLURM_JOB_ID.$SLURM_STEP_ID on $HOROVOD_HOSTNAME"}),
        events);
    EXPECT_TRUE(events.RunToEnd(*transport, 60));
  }
  unsetenv("SLURM_JOB_ID");
  unsetenv("SLURM_JOB_NODELIST");
  EXPECT_EQ(events.output[0].rfind("step " + job + ".", 0), 0u) << events.output[0];
  EXPECT_NE(events.output[1].find(" on node2\n"), std::string::npos) << events.output[1];
  EXPECT_TRUE(events.exits[1].ok()) << events.exits[1].Describe();
  // The allocation is the caller's: dtrain leaves it running.
  EXPECT_EQ(Squeue({"-j", job, "-o", "%T"}), "RUNNING\n");
  RunSlurmCommand({"scancel", job}, "", 10000);
}

TEST_F(SlurmTransportTest, FailingRankReportsItsExitStatus) {
  auto placed = Place(SlurmSpec(1, 2));
  const ClusterSpec& spec = placed->spec;
  auto transport = MakeTransport(spec);
  Recorder events;
  transport->Start(Ranks(spec, {"sh", "-c", "echo rank $RANK; [ $RANK = 1 ] && exit 7; exit 0"}),
                   events);
  ASSERT_TRUE(events.RunToEnd(*transport, 60));
  EXPECT_TRUE(events.exits[0].ok()) << events.exits[0].Describe();
  EXPECT_EQ(events.exits[1].code, 7) << events.exits[1].Describe();
  EXPECT_EQ(events.exits[1].ShellStatus(), 7);
  EXPECT_EQ(events.output[1], "rank 1\n");
}

TEST_F(SlurmTransportTest, InterruptCancelsTheStepAndLeavesNoTask) {
  auto placed = Place(SlurmSpec(2, 1));
  const ClusterSpec& spec = placed->spec;
  auto transport = MakeTransport(spec);
  Recorder events;
  transport->Start(Ranks(spec, {"sh", "-c", "echo ready; exec sleep 97"}), events);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((events.output[0].empty() || events.output[1].empty()) &&
         std::chrono::steady_clock::now() < deadline) {
    transport->Poll(200, events);
  }
  ASSERT_EQ(events.output[0], "ready\n");
  transport->SignalAll(SIGINT);
  ASSERT_TRUE(events.RunToEnd(*transport, 30));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(events.exits[rank].signal, SIGINT) << events.exits[rank].Describe();
    EXPECT_EQ(events.exits[rank].ShellStatus(), 130);
  }
  // Slurm forgets a cancelled step (and the held job) within a few seconds; no task process
  // may survive it.
  transport.reset();
  placed.reset();
  std::string steps = "?";
  for (int i = 0; i < 50 && !steps.empty(); ++i) {
    steps = Squeue({"--steps", "-n", "dtrain-slurm-test"});
    if (!steps.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(steps, "");
  EXPECT_NE(system("pgrep -f 'slee[p] 97' >/dev/null"), 0) << "a task outlived the step";
}

// The doctor's shape: one probe per node reading its script from stdin, plus a listener on the
// first node (so the nodes run different numbers of tasks).
TEST_F(SlurmTransportTest, OneProbePerNodeReadsItsStdin) {
  auto placed = Place(SlurmSpec(2, 4));
  const ClusterSpec& spec = placed->spec;
  std::vector<ProcessSpec> procs;
  for (int node = 0; node < 3; ++node) {
    ProcessSpec probe;
    probe.id = node;
    probe.node_index = node % 2;
    probe.argv = {"sh", "-s", "--", "arg one"};
    probe.env = {{"MODE", node == 2 ? "listen" : "probe"},
                 {"DTRAIN_PROBE_RDZV_ADDR", spec.nodes[0].address}};
    probe.stdin_data = "echo \"$MODE on $SLURMD_NODENAME with [$1] to $DTRAIN_PROBE_RDZV_ADDR\"\n";
    procs.push_back(probe);
  }
  auto transport = MakeTransport(spec);
  Recorder events;
  transport->Start(procs, events);
  ASSERT_TRUE(events.RunToEnd(*transport, 60));
  for (int id = 0; id < 3; ++id) EXPECT_TRUE(events.exits[id].ok()) << events.exits[id].Describe();
  EXPECT_EQ(events.output[0], "probe on node1 with [arg one] to 127.0.0.1\n");
  EXPECT_EQ(events.output[1], "probe on node2 with [arg one] to 127.0.0.1\n");
  EXPECT_EQ(events.output[2], "listen on node1 with [arg one] to 127.0.0.1\n");
}

// Ctrl-C while the batch job still waits for nodes: the job is withdrawn, and the wait ends as
// interrupted (128+SIGINT).
TEST_F(SlurmTransportTest, InterruptWhilePendingWithdrawsTheBatchJob) {
  const std::string busy_job = HoldNodes(4, "busy");
  ASSERT_NE(busy_job, "");
  std::string state;
  std::thread ctrl_c([&state] {
    for (int i = 0; i < 50 && state != "PENDING\n"; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      state = Squeue({"-n", "dtrain-slurm-test", "-o", "%T"});
    }
    if (state == "PENDING\n") kill(getpid(), SIGINT);  // what Ctrl-C at the terminal sends
  });
  int exit_code = 0;
  try {
    Place(SlurmSpec(2, 1));
  } catch (const Error& e) {
    exit_code = e.exit_code();
    EXPECT_NE(std::string(e.what()).find("SIGINT"), std::string::npos) << e.what();
  }
  ctrl_c.join();
  ASSERT_EQ(state, "PENDING\n");
  EXPECT_EQ(exit_code, 128 + SIGINT);
  EXPECT_EQ(Squeue({"-n", "dtrain-slurm-test", "-t", "PD,R"}), "");
  RunSlurmCommand({"scancel", busy_job}, "", 10000);
}

// A dtrain that dies without cancelling its batch job: the job gives its nodes back once no
// step has run for DTRAIN_SLURM_IDLE_S seconds.
TEST_F(SlurmTransportTest, AbandonedBatchJobReleasesItsNodes) {
  setenv("DTRAIN_SLURM_IDLE_S", "2", 1);
  auto placed = Place(SlurmSpec(1, 1));
  const ClusterSpec& spec = placed->spec;
  auto transport = MakeTransport(spec);
  Recorder events;
  transport->Start(Ranks(spec, {"true"}), events);
  ASSERT_TRUE(events.RunToEnd(*transport, 60));
  unsetenv("DTRAIN_SLURM_IDLE_S");
  EXPECT_TRUE(events.exits[0].ok()) << events.exits[0].Describe();
  std::string left = "?";
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    left = Squeue({"-n", "dtrain-slurm-test", "-t", "PD,R"});
  }
  EXPECT_EQ(left, "") << "the batch job still holds its nodes while dtrain is alive but idle";
}

TEST_F(SlurmTransportTest, RejectedSubmissionIsAnError) {
  ClusterSpec spec = SlurmSpec(1, 2);
  spec.slurm.partition = "no-such-partition";
  std::string error;
  try {
    Place(spec);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("no-such-partition"), std::string::npos) << error;
}

TEST_F(SlurmTransportTest, UnplacedClusterIsAnErrorForEveryRank) {
  const ClusterSpec spec = SlurmSpec(1, 2);
  auto transport = MakeTransport(spec);
  Recorder events;
  transport->Start(Ranks(spec, {"true"}), events);
  EXPECT_FALSE(transport->Poll(10, events));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(events.exits[rank].error.find("not placed"), std::string::npos)
        << events.exits[rank].Describe();
  }
}

// ---- The same through `dtrain launch` and a cluster file, as a user runs it. ----

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";

using testing::ReadFile;

// A fresh folder with a two-node cluster file whose logs land in <folder>/logs.
std::string ClusterFolder(const std::string& name, int slots) {
  const std::string dir = "/tmp/dtrain-slurm-test-" + name + "-" + std::to_string(getpid());
  RunSlurmCommand({"mkdir", "-p", dir}, "", 10000);
  std::ofstream(dir + "/cluster.yaml")
      << "transport: slurm\n"
      << "slurm: {time: \"00:05:00\"}\n"
      << "nodes:\n  - {host: a, slots: " << slots << "}\n  - {host: b, slots: " << slots << "}\n"
      << "log_dir: " << dir << "/logs\n";
  return dir;
}

SlurmCommandResult Dtrain(const std::vector<std::string>& args, int timeout_s = 90) {
  std::vector<std::string> argv = {kDtrain};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunSlurmCommand(argv, "", timeout_s * 1000);
}

class DtrainLaunchOnSlurm : public SlurmTransportTest {
 protected:
  void SetUp() override {
    SlurmTransportTest::SetUp();
    if (access(kDtrain.c_str(), X_OK) != 0) GTEST_SKIP() << kDtrain << " is not built";
  }
  // The test's folder goes, whether the test passed or not.
  void TearDown() override {
    if (!dir_.empty()) RunSlurmCommand({"rm", "-rf", dir_}, "", 10000);
  }
  std::string Folder(const std::string& name, int slots) {
    return dir_ = ClusterFolder(name, slots);
  }

 private:
  std::string dir_;
};

TEST_F(DtrainLaunchOnSlurm, WritesPerRankLogsThatDtrainLogsReads) {
  const std::string dir = Folder("logs", 1);
  const SlurmCommandResult run =
      Dtrain({"launch", "-c", dir + "/cluster.yaml", "--job", "two", "--", "sh", "-c",
              "echo hello from $RANK of $WORLD_SIZE on $HOROVOD_HOSTNAME via $MASTER_ADDR"});
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_EQ(ReadFile(dir + "/logs/two/rank-0.log"), "hello from 0 of 2 on node1 via 127.0.0.1\n");
  EXPECT_EQ(ReadFile(dir + "/logs/two/rank-1.log"), "hello from 1 of 2 on node2 via 127.0.0.1\n");
  EXPECT_NE(ReadFile(dir + "/logs/two/sbatch.sh").find("#SBATCH --nodes=2\n"), std::string::npos);
  const SlurmCommandResult logs =
      Dtrain({"logs", "--log-dir", dir + "/logs", "--job", "two", "--rank", "1"});
  EXPECT_EQ(logs.status, 0) << logs.err;
  EXPECT_NE(logs.out.find("hello from 1 of 2 on node2"), std::string::npos) << logs.out;
}

TEST_F(DtrainLaunchOnSlurm, FailingRankFailsTheJobWithItsStatus) {
  const std::string dir = Folder("fail", 1);
  const SlurmCommandResult run =
      Dtrain({"launch", "-c", dir + "/cluster.yaml", "--job", "bad", "--", "sh", "-c",
              "[ $RANK = 1 ] && { echo giving up >&2; exit 5; }; sleep 30"});
  EXPECT_EQ(run.status, 5) << run.err;
  EXPECT_NE(run.err.find("rank 1"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("exit 5"), std::string::npos) << run.err;
  EXPECT_EQ(ReadFile(dir + "/logs/bad/rank-1.log"), "giving up\n");
  EXPECT_EQ(Squeue({"-n", "dtrain-bad", "-t", "PD,R"}), "");
}

TEST_F(DtrainLaunchOnSlurm, InterruptLeavesNoStepNoJobAndNoTask) {
  const std::string dir = Folder("int", 1);
  SubprocessOptions options;
  options.argv = {kDtrain, "launch", "-c", dir + "/cluster.yaml",      "--job", "stop",
                  "--",    "sh",     "-c", "echo ready; exec sleep 89"};
  options.out = options.err = Stdio::kNull;
  Subprocess dtrain;
  ASSERT_EQ(dtrain.Start(options), "");
  const std::string log0 = dir + "/logs/stop/rank-0.log", log1 = dir + "/logs/stop/rank-1.log";
  for (int i = 0; i < 300 && (ReadFile(log0).empty() || ReadFile(log1).empty()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(ReadFile(log1), "ready\n");
  dtrain.Signal(SIGINT);  // what Ctrl-C at the terminal sends
  EXPECT_EQ(dtrain.Finish().ShellStatus(), 130);
  std::string left = "?";
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    left = Squeue({"--steps", "-n", "dtrain-stop"}) + Squeue({"-n", "dtrain-stop", "-t", "PD,R"});
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(left, "");
  EXPECT_NE(system("pgrep -f 'slee[p] 89' >/dev/null"), 0) << "a task outlived the job";
}

// A short two-rank dtrain-clip run on Fashion-MNIST, ranks on node1 and node2.
TEST_F(DtrainLaunchOnSlurm, TrainsDtrainClipOnTwoNodes) {
  const std::string clip = std::string(DTRAIN_BINARY_DIR) + "/dtrain-clip";
  if (access(clip.c_str(), X_OK) != 0) GTEST_SKIP() << clip << " is not built";
  const std::string dir = Folder("clip", 1);
  const SlurmCommandResult run = Dtrain({"launch",
                                         "-c",
                                         dir + "/cluster.yaml",
                                         "--job",
                                         "clip",
                                         "--",
                                         clip,
                                         "train",
                                         "--dataset-type",
                                         "fashion-mnist",
                                         "--train-num-samples",
                                         "512",
                                         "--epochs",
                                         "1",
                                         "--batch-size",
                                         "64",
                                         "--zeroshot-samples",
                                         "100",
                                         "--threads",
                                         "1"},
                                        150);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string log0 = ReadFile(dir + "/logs/clip/rank-0.log");
  EXPECT_NE(log0.find("x 2 rank(s)"), std::string::npos) << log0;
  // The job's store is `dtrain-clip store` in a step of its own; rank 0 is only a client.
  EXPECT_NE(run.err.find("dtrain: the job's TCPStore on "), std::string::npos) << run.err;
  EXPECT_EQ(log0.find("failed to bind"), std::string::npos) << log0;
  EXPECT_NE(log0.find("done:"), std::string::npos) << log0;
  EXPECT_NE(ReadFile(dir + "/logs/clip/rank-1.log").find("done:"), std::string::npos);
  EXPECT_NE(ReadFile(dir + "/logs/clip/metrics/rank-0.jsonl").find("\"event\":\"end\""),
            std::string::npos);
}

using test::FreePort;

// Rank 1 of a torch.distributed (Gloo) job sleeps before an all_reduce rank 0 waits in. The
// rank probe runs as steps beside the ranks' step (which holds every CPU of the allocation), so
// the stall is reported soon after the timeout, naming rank 1, its node and its Python frame;
// --on-stall stop ends the job with 124 and leaves no step and no task.
TEST_F(DtrainLaunchOnSlurm, StalledRankIsNamedAndOnStallStopLeavesNothing) {
  if (!testing::HaveTorch()) GTEST_SKIP() << "no torch in " << testing::kVenvPython;
  const std::string dir = Folder("stall", 1);
  testing::WriteFile(dir + "/hang.py", testing::HangingTorchScript(1));
  testing::DtrainProcess dtrain(
      {"launch", "-c", dir + "/cluster.yaml", "--job", "slurm-stall", "--master-port",
       std::to_string(FreePort()), "--stall-timeout", "3", "--on-stall", "stop", "--grace-period",
       "3", "--", testing::kVenvPython, dir + "/hang.py"},
      dir);
  ASSERT_EQ(dtrain.Wait(120), 124) << dtrain.err();
  // Python's start and the rendezvous take a few seconds; the probes none to speak of.
  EXPECT_LT(dtrain.seconds(), 30) << dtrain.err();
  std::printf("stopped %.1f s after launch (stall timeout 3 s)\n", dtrain.seconds());
  const std::string err = dtrain.err();
  // The job's store is dtrain's here too: a step of its own on the first node, beside the ranks.
  EXPECT_NE(err.find("dtrain: the job's TCPStore on "), std::string::npos) << err;
  const std::string report = ReadFile(dir + "/logs/slurm-stall/stall-1.txt");
  EXPECT_EQ(ReadFile(dir + "/logs/slurm-stall/rank-0.log").find("step 3"), std::string::npos);
  EXPECT_NE(report.find("the job waits for rank 1\n"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1 in <module> ("), std::string::npos) << report;
  EXPECT_NE(report.find("hang.py:8) `time.sleep(3600)`"), std::string::npos) << report;
  EXPECT_NE(report.find("rank 1 on b (pid "), std::string::npos) << report;
  EXPECT_NE(report.find("Python stack (py-spy)"), std::string::npos) << report;
  EXPECT_EQ(report.find("not probed"), std::string::npos) << report;
  EXPECT_NE(err.find("dtrain: stall: rank"), std::string::npos) << err;
  EXPECT_NE(err.find("dtrain: stall report written to " + dir + "/logs/slurm-stall/stall-1.txt"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("job slurm-stall stopped (--on-stall stop): rank 1 on node b stalled"),
            std::string::npos)
      << err;
  EXPECT_NE(ReadFile(dir + "/logs/slurm-stall/job.json").find("\"exit_code\": 124"),
            std::string::npos);
  std::string left = "?";
  for (int i = 0; i < 50 && !left.empty(); ++i) {
    left = Squeue({"--steps", "-n", "dtrain-slurm-stall"}) +
           Squeue({"-n", "dtrain-slurm-stall", "-t", "PD,R"});
    if (!left.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(left, "");
  EXPECT_TRUE(testing::ProcessesWithEnv("DTRAIN_JOB=slurm-stall").empty())
      << "a task outlived the job";
  EXPECT_NE(system(("pgrep -f '" + dir + "/[h]ang.py' >/dev/null").c_str()), 0)
      << "a rank outlived the job";
}

// `dtrain status` from another process finds the Slurm job in job.json and probes its ranks
// with a step of their job.
TEST_F(DtrainLaunchOnSlurm, StatusProbesTheRanksOfARunningJob) {
  const std::string dir = Folder("status", 1);
  testing::DtrainProcess dtrain({"launch", "-c", dir + "/cluster.yaml", "--job", "st", "--", "sh",
                                 "-c", "echo hello from $RANK; exec sleep 79"},
                                dir);
  const std::string log0 = dir + "/logs/st/rank-0.log", log1 = dir + "/logs/st/rank-1.log";
  ASSERT_TRUE(
      testing::WaitFor([&] { return !ReadFile(log0).empty() && !ReadFile(log1).empty(); }, 30))
      << dtrain.err();
  const testing::DtrainRun live =
      testing::RunDtrain({"status", "--log-dir", dir + "/logs", "--json"}, dir, {}, 30);
  EXPECT_EQ(live.status, 0) << live.err;
  for (const char* expected :
       {"\"status\": \"running\"", "\"transport\": \"slurm\"", "\"node_errors\": {}",
        "\"node\": \"b\"", "\"last_line\": \"hello from 1\""}) {
    EXPECT_NE(live.out.find(expected), std::string::npos) << expected << " in " << live.out;
  }
  EXPECT_EQ(live.out.find("\"pid\": null"), std::string::npos) << live.out;
  EXPECT_EQ(live.out.find("not found"), std::string::npos) << live.out;
  const std::string sleeping = "\"state\": \"sleeping\"";  // both ranks
  const size_t first = live.out.find(sleeping);
  EXPECT_NE(first, std::string::npos) << live.out;
  EXPECT_NE(live.out.find(sleeping, first + 1), std::string::npos) << live.out;
  dtrain.Signal(SIGINT);
  EXPECT_EQ(dtrain.Wait(60), 130) << dtrain.err();
  const testing::DtrainRun ended =
      testing::RunDtrain({"status", "--log-dir", dir + "/logs", "--job", "st"}, dir, {}, 30);
  EXPECT_EQ(ended.status, 0) << ended.err;
  EXPECT_NE(ended.out.find("job st: interrupted"), std::string::npos) << ended.out;
}

}  // namespace
}  // namespace dtrain

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new dtrain::SlurmCluster);
  return RUN_ALL_TESTS();
}
