// The Slurm transport against a real Slurm on this machine (tests/support/slurm_cluster.h): ranks
// of batch jobs and of steps in the caller's allocation with their environment, exit statuses,
// Ctrl-C (while running and while pending), the doctor's one probe per node, an abandoned batch
// job, and the errors of a rejected submission and of a cluster not placed.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launcher/error.h"
#include "launcher/slurm/slurm_allocation.h"
#include "launcher/slurm/slurm_child.h"
#include "launcher/transport.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/transport_recorder.h"

namespace dtrain {
namespace {

using test::SlurmTransportTest;
using test::Squeue;

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
  placed->spec = PlaceOnSlurm(spec, {"dtrain-slurm-test", "", {}}, placed->allocation);
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
  const std::string job = test::HoldNodes(1, "outer");
  ASSERT_NE(job, "");
  const std::string nodelist = test::WaitUntilRunning(job);
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
  const std::string busy_job = test::HoldNodes(4, "busy");
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

}  // namespace
}  // namespace dtrain
