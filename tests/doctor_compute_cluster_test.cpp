// `dtrain doctor --compute` on three real sshd nodes in network namespaces (tests/cluster): each
// node runs the real `dtrain-clip check` (on the CPU here) as a rank of the doctor's job. Then the
// check on node1 is stopped with SIGSTOP as soon as it starts, a device that stops answering:
// the doctor names node1 as hung once --compute-timeout has passed, the other nodes still pass,
// --exclude-bad leaves it out of the hostfile, and nothing is left running on node1. With
// node2's sshd killed, the doctor still reports, naming node2 and the check that could not start.
// And Ctrl-C while node1's check is stopped: no node is judged from the cut-short check. And a
// node whose CPU is throttled to a tenth (its sshd, so every process of the check, in a cgroup
// with a CPU quota): the device that is slow is named, and only it.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cpu_cgroup.h"
#include "tests/support/doctor_run.h"
#include "tests/support/doctor_test_job_interrupt.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using test::DoctorRun;
using test::Findings;
using test::SshTestCluster;

// The cluster file with one intra-op thread per rank: the nodes share this machine's cores, and
// their OpenMP teams would oversubscribe two cores so that a 1 s check takes longer than the
// 15 s limit below.
std::string OneThreadEach(const SshTestCluster& cluster) {
  const std::string file = cluster.dir() + "/compute.yaml";
  test::RunOutput("cp " + cluster.cluster_file() + " " + file +
                  " && echo 'env: {OMP_NUM_THREADS: \"1\"}' >> " + file);
  return file;
}

TEST(DoctorComputeCluster, EveryNodePassesThenAStoppedCheckIsNamedAsHung) {
  SshTestCluster cluster("doctor-compute", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = OneThreadEach(cluster);

  // 1. Every node's check runs and passes.
  const DoctorRun ok = test::RunDoctor("--json --compute", file);
  ASSERT_TRUE(ok.doc.is_object()) << ok.text;
  EXPECT_EQ(ok.status, 0) << ok.text;
  const nlohmann::json& compute = ok.doc["compute"];
  ASSERT_TRUE(compute.is_object()) << ok.text;
  EXPECT_EQ(compute["launch_status"], 0);
  EXPECT_TRUE(compute["job_dir"].is_null()) << "a passing check leaves no folder";
  ASSERT_EQ(compute["ranks"].size(), 3u) << compute.dump(2);
  std::vector<std::string> nodes;
  for (const auto& r : compute["ranks"]) {
    nodes.push_back(r["node"]);
    EXPECT_TRUE(r["passed"].get<bool>()) << r.dump(2);
    EXPECT_EQ(r["device"], "cpu");
    EXPECT_EQ(r["exit_status"], 0);
    std::vector<std::string> names;
    for (const auto& c : r["checks"]) names.push_back(c["name"]);
    EXPECT_EQ(names,
              (std::vector<std::string>{"attention", "attention-causal", "patch-embedding",
                                        "linear-rows", "fused-bias-grad", "layer-norm",
                                        "weight-copies", "captured-step", "captured-lengths"}));
  }
  EXPECT_EQ(nodes, (std::vector<std::string>{"node0", "node1", "node2"}));
  // The computations matched, and the speeds are alike (each rank also says its figures).
  const std::vector<nlohmann::json> oks = Findings(ok, "compute", "ok");
  ASSERT_EQ(oks.size(), 2u) << ok.text;
  EXPECT_NE(oks[1]["message"].get<std::string>().find("the 3 cpu devices are alike in speed"),
            std::string::npos)
      << ok.text;
  std::cout << oks[1]["message"].get<std::string>() << "\n";
  for (const auto& r : compute["ranks"]) {
    std::vector<std::string> speeds;
    for (const auto& speed : r["speeds"]) {
      speeds.push_back(speed["name"]);
      EXPECT_GT(speed["value"].get<double>(), 0) << r.dump(2);
    }
    EXPECT_EQ(speeds, (std::vector<std::string>{"matmul", "memory-copy"})) << r.dump(2);
  }
  EXPECT_TRUE(Findings(ok, "compute", "error").empty()) << ok.text;

  // 2. node1's check stopped as soon as it starts.
  std::atomic<int> stopped{0};
  std::atomic<bool> done{false};
  std::thread stopper([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done && std::chrono::steady_clock::now() < until) {
      if (int pid = test::ClipProcess(cluster, 1, "check"); pid > 0 && kill(pid, SIGSTOP) == 0) {
        stopped = pid;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  const std::string good = cluster.dir() + "/good.txt";
  const DoctorRun hung =
      test::RunDoctor("--json --compute --compute-timeout 15 --exclude-bad -o " + good, file);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done = true;
  stopper.join();
  ASSERT_GT(stopped.load(), 0) << "node1's check was never seen running\n" << hung.text;
  ASSERT_TRUE(hung.doc.is_object()) << hung.text;
  EXPECT_EQ(hung.status, 1) << hung.text;
  const std::vector<nlohmann::json> errors = Findings(hung, "compute", "error");
  ASSERT_EQ(errors.size(), 1u) << hung.text;
  EXPECT_EQ(errors[0]["nodes"], nlohmann::json::array({"node1"}));
  EXPECT_EQ(errors[0]["message"].get<std::string>().rfind(
                "the compute check did not finish within 15 s on node node1", 0),
            0u)
      << errors[0].dump();
  for (const auto& r : hung.doc["compute"]["ranks"]) {
    if (r["node"] == "node1") {
      EXPECT_FALSE(r["passed"].get<bool>());
      EXPECT_TRUE(r["exit_status"] == 124 || r["exit_status"] == 137) << r.dump();
    } else {
      EXPECT_TRUE(r["passed"].get<bool>()) << r.dump();
    }
  }
  EXPECT_LT(seconds, 15 + 20 + 30) << "the limit, the doctor's own probe and the job's start";
  // --exclude-bad: the hostfile dtrain launch --hostfile then runs on has node0 and node2.
  EXPECT_NE(hung.text.find("wrote " + good + ": 2 of 3 nodes; left out: node1"), std::string::npos)
      << hung.text;
  EXPECT_NE(test::ReadText(good).find("# excluded node1: the compute check did not finish"),
            std::string::npos)
      << test::ReadText(good);
  EXPECT_EQ(cluster.LeftoverProcesses(3, 5), "") << "timeout ended the stopped check";

  // 3. node2's sshd killed: the test job cannot start anywhere, and the doctor still reports,
  // naming node2 unreachable and the compute check as not started.
  test::RunOutput("kill -KILL $(cat " + cluster.dir() + "/node2/sshd.pid)");
  const DoctorRun down = test::RunDoctor("--json --compute", file);
  ASSERT_TRUE(down.doc.is_object()) << down.text;
  EXPECT_EQ(down.status, 1) << down.text;
  const std::vector<nlohmann::json> reach = Findings(down, "reach", "error");
  ASSERT_EQ(reach.size(), 1u) << down.text;
  EXPECT_EQ(reach[0]["nodes"], nlohmann::json::array({"node2"}));
  const std::vector<nlohmann::json> not_started = Findings(down, "compute", "error");
  ASSERT_EQ(not_started.size(), 1u) << down.text;
  EXPECT_NE(not_started[0]["message"].get<std::string>().find(
                "the compute check started on no node (dtrain launch exited with status 1): "),
            std::string::npos)
      << not_started[0].dump();
  EXPECT_NE(not_started[0]["message"].get<std::string>().find("node node2"), std::string::npos)
      << not_started[0].dump();
  EXPECT_EQ(not_started[0]["message"].get<std::string>().find('\n'), std::string::npos);
  EXPECT_TRUE(Findings(down, "compute", "ok").empty()) << down.text;
  EXPECT_EQ(cluster.LeftoverProcesses(2, 5), "");
}

// Ctrl-C while --compute runs, node1's check stopped (node0's has passed or is passing): the
// test job stops every rank, and the doctor judges none of it. Before, the interrupted job was
// judged: node0, whose checks had passed, was an error for its missing exit line, left out of the
// hostfile (and under --drain, drained), and the doctor exited 1.
TEST(DoctorComputeCluster, CtrlCDuringTheCheckBlamesNoNodeAndWritesNoHostfile) {
  SshTestCluster cluster("doctor-compute-int", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = OneThreadEach(cluster);
  const std::string good = cluster.dir() + "/good.txt";
  std::filesystem::remove(good);
  testing::DtrainProcess doctor({"doctor", "--json", "--compute", "--compute-timeout", "120",
                                 "--exclude-bad", "-o", good, "-c", file},
                                cluster.dir(), {"NO_COLOR=1"});
  test::ExpectTestCutShortByCtrlC(cluster, 2, doctor, "compute", "check", good);
}

// node2 throttled to a tenth of a CPU (tests/support/cpu_cgroup.h): its check runs (the
// computations still match) but its device is named slow, the others are not, and --exclude-bad
// leaves node2 out.
TEST(DoctorComputeCluster, ANodeThrottledToATenthIsNamedSlow) {
  SshTestCluster cluster("doctor-compute-slow", 3, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = OneThreadEach(cluster);
  // node2's sshd, so every process of its check, in the cgroup; a 10 ms period, so that no timed
  // run (a few ms of CPU each) fits in one period's quota. A tenth: its figures come out at 9-13%
  // of its peers', and stay below the CPU limit of 50% when the other nodes share the machine
  // with other tests (a fifth came out at 36% for the product and above 50% for the copy so).
  testing::CpuCgroup slowed("dtrain-compute-slow-" + std::to_string(::getpid()), 0.1, 10000);
  if (!slowed.error().empty()) GTEST_SKIP() << slowed.error();
  std::string sshd = test::ReadText(cluster.dir() + "/node2/sshd.pid");
  sshd.erase(sshd.find_last_not_of(" \n") + 1);
  ASSERT_TRUE(slowed.Move(sshd)) << sshd;
  const std::string good = cluster.dir() + "/good.txt";
  const DoctorRun slow = test::RunDoctor("--json --compute --exclude-bad -o " + good, file);
  ASSERT_TRUE(slow.doc.is_object()) << slow.text;
  EXPECT_EQ(slow.status, 1) << slow.text;
  for (const auto& r : slow.doc["compute"]["ranks"]) {
    EXPECT_TRUE(r["passed"].get<bool>()) << r.dump(2);
  }
  const std::vector<nlohmann::json> errors = Findings(slow, "compute", "error");
  ASSERT_EQ(errors.size(), 1u) << slow.text;
  EXPECT_EQ(errors[0]["nodes"], nlohmann::json::array({"node2"}));
  const std::string message = errors[0]["message"];
  // The matrix product is slow (on CPU devices the copy is not judged: see compute_verdict.h).
  EXPECT_EQ(message.rfind("node node2 (cpu, rank 2) is slow: matmul ", 0), 0u) << message;
  std::cout << message << "\n";
  EXPECT_NE(slow.text.find("wrote " + good + ": 2 of 3 nodes; left out: node2"), std::string::npos)
      << slow.text;
  EXPECT_EQ(cluster.LeftoverProcesses(3, 5), "");
}

}  // namespace
}  // namespace dtrain
