// `dtrain doctor --bandwidth` on four real sshd nodes in network namespaces (tests/cluster):
// dtrain-clip measures with Gloo over the nodes' veth links. With one node's link throttled by
// `tc ... tbf rate 200mbit` on both ends of its veth, the doctor names that node, and only it,
// and its pairs measure near the rate tc set; with no throttle it names none. With a node's sshd
// killed the doctor still reports, the test's refusal as its finding. With one node's InfiniBand
// port counting symbol errors while the test runs (its sysfs stand-in), the doctor names that
// link. And Ctrl-C while node1's rank of the test is stopped: no node or link is judged.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/doctor_run.h"
#include "tests/support/doctor_test_job_interrupt.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/gpu_node_stand_ins.h"
#include "tests/support/ssh_cluster.h"

namespace dtrain {
namespace {

using test::DoctorRun;
using test::RunOutput;
using test::SshTestCluster;

std::vector<std::string> BandwidthErrors(const DoctorRun& r) {
  std::vector<std::string> out;
  if (!r.doc.is_object()) return out;
  for (const auto& f : r.doc["findings"]) {
    if (f["check"] == "bandwidth" && f["severity"] == "error") out.push_back(f["message"]);
  }
  return out;
}

TEST(DoctorBandwidthCluster, NamesTheThrottledNodeAndOnlyIt) {
  SshTestCluster cluster("doctor-bandwidth", 4, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string file = cluster.cluster_file();

  // 1. No throttle: every pair is measured and nothing is named. The nodes share this machine's 2
  // cores with the test running beside this one (a training run): a pair's figure can fall under
  // half the others' while a CPU is taken, and a link is then named slow. That run is shown and
  // the doctor is run once more; the second must name nothing.
  DoctorRun fast = test::RunDoctor("--json --bandwidth --bandwidth-mib 4", file);
  if (!BandwidthErrors(fast).empty()) {
    std::printf("the unthrottled run named a slow link (this machine busy?); once more:\n%s\n",
                BandwidthErrors(fast).front().c_str());
    fast = test::RunDoctor("--json --bandwidth --bandwidth-mib 4", file);
  }
  ASSERT_TRUE(fast.doc.is_object()) << fast.text;
  EXPECT_EQ(fast.status, 0) << fast.text;
  EXPECT_TRUE(BandwidthErrors(fast).empty()) << fast.text;
  const nlohmann::json& bw = fast.doc["bandwidth"];
  ASSERT_TRUE(bw.is_object()) << fast.text;
  EXPECT_EQ(bw["launch_status"], 0) << fast.text;
  int pairs = 0, all = 0;
  for (const auto& f : bw["figures"]) {
    pairs += f["kind"] == "pair";
    all += f["kind"] == "all";
    EXPECT_EQ(f["backend"], "gloo");
    EXPECT_GT(f["busbw_gbs"].get<double>(), 0) << f.dump();
  }
  EXPECT_EQ(all, 1) << bw.dump();
  EXPECT_EQ(pairs, 4) << bw.dump();  // the ring 0-1, 1-2, 2-3, 3-0
  EXPECT_TRUE(bw["slow_nodes"].empty()) << bw.dump();

  // 2. node2's link limited to 200 Mbit/s in both directions: on the bridge's end of its veth
  // (in the head namespace, where this test runs) and on its own eth0.
  const std::string tbf = " root tbf rate 200mbit burst 256kbit latency 100ms 2>&1; echo rc=$?";
  std::string head = RunOutput("tc qdisc add dev nd2" + tbf);
  ASSERT_NE(head.find("rc=0"), std::string::npos) << head;
  std::string own = cluster.OnNode(2, "tc qdisc add dev eth0" + tbf);
  ASSERT_NE(own.find("rc=0"), std::string::npos) << own;

  DoctorRun slow = test::RunDoctor("--json --bandwidth --bandwidth-mib 4", file);
  ASSERT_TRUE(slow.doc.is_object()) << slow.text;
  EXPECT_EQ(slow.status, 1) << slow.text;
  EXPECT_EQ(slow.doc["bandwidth"]["slow_nodes"], nlohmann::json::array({"node2"})) << slow.text;
  EXPECT_TRUE(slow.doc["bandwidth"]["slow_links"].empty()) << slow.text;
  std::vector<std::string> errors = BandwidthErrors(slow);
  ASSERT_EQ(errors.size(), 1u) << slow.text;
  EXPECT_NE(errors[0].find("node node2 is slow"), std::string::npos) << errors[0];
  // Its pairs move about what tc lets through: 200 Mbit/s = 0.025 GB/s (a 2-rank allreduce's
  // bus bandwidth equals its algorithm bandwidth).
  for (const auto& f : slow.doc["bandwidth"]["figures"]) {
    if (f["kind"] != "pair") continue;
    const auto nodes = f["nodes"].get<std::vector<std::string>>();
    const bool with_node2 = nodes[0] == "node2" || nodes[1] == "node2";
    const double gbs = f["busbw_gbs"].get<double>();
    if (with_node2) {
      EXPECT_LT(gbs, 0.03) << f.dump();
      EXPECT_GT(gbs, 0.01) << f.dump();
    } else {
      EXPECT_GT(gbs, 0.05) << f.dump();
    }
  }

  // 3. node3's sshd killed: launch refuses to start the test, and the doctor still reports,
  // with that refusal as the bandwidth finding.
  RunOutput("kill -KILL $(cat " + cluster.dir() + "/node3/sshd.pid)");
  DoctorRun down = test::RunDoctor("--json --bandwidth --bandwidth-mib 4", file);
  ASSERT_TRUE(down.doc.is_object()) << down.text;
  EXPECT_EQ(down.status, 1) << down.text;
  errors = BandwidthErrors(down);
  ASSERT_EQ(errors.size(), 1u) << down.text;
  EXPECT_NE(errors[0].find("the bandwidth test stopped with status 1: "), std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("node node3"), std::string::npos) << errors[0];
}

// From before the doctor starts to after it ends, node1's port mlx5_0/1 counts 5 symbol errors
// every 100 ms (a flaky cable: a warning), and node0's goes down and comes back every 400 ms (an
// error: --exclude-bad leaves node0 out). The counts are read just before and after the test.
TEST(DoctorBandwidthCluster, NamesALinkWhoseErrorsGrowDuringTheTest) {
  SshTestCluster cluster("doctor-link-errors", 2, 1);
  REQUIRE_CLUSTER(cluster);
  for (int i = 0; i < 2; ++i) {
    const std::string node = cluster.dir() + "/node" + std::to_string(i);
    test::WriteStandIns(node + "-bin", test::HgxQuery(), "[    1.0] Linux version 6.1\n");
    test::WriteInfiniband(node + "-sys", "mlx5_0", "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)");
  }
  const std::string file = test::StandInClusterFile(cluster, 2, "");
  const std::string counters = "-sys/class/infiniband/mlx5_0/ports/1/counters/";
  std::atomic<bool> stop{false};
  std::thread flaky([&] {
    for (long long n = 0; !stop; n += 5) {
      for (const auto& [node, counter, value] : {std::make_tuple("node1", "symbol_error", n),
                                                 std::make_tuple("node0", "link_downed", n / 20)}) {
        const std::string path = cluster.dir() + "/" + node + counters + counter;
        std::ofstream(path + ".new") << value << "\n";
        std::filesystem::rename(path + ".new", path);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const std::string good = cluster.dir() + "/good.txt";
  DoctorRun r =
      test::RunDoctor("--json --bandwidth --bandwidth-mib 4 --exclude-bad -o " + good, file);
  stop = true;
  flaky.join();
  ASSERT_TRUE(r.doc.is_object()) << r.text;
  EXPECT_EQ(r.doc["bandwidth"]["launch_status"], 0) << r.text;
  std::map<std::string, nlohmann::json> found;  // node -> its link-errors finding
  for (const auto& f : r.doc["findings"]) {
    if (f["check"] == "link-errors") found[f["nodes"][0]] = f;
  }
  ASSERT_EQ(found.size(), 2u) << r.text;
  EXPECT_EQ(found["node1"]["severity"], "warning");
  const std::string message = found["node1"]["message"];
  std::printf("%s\n%s\n", message.c_str(), found["node0"]["message"].get<std::string>().c_str());
  EXPECT_EQ(message.find("node node1: link errors grew in "), 0u) << message;
  EXPECT_NE(message.find("mlx5_0/1 symbol_error +"), std::string::npos) << message;
  EXPECT_EQ(message.find("GPU"), std::string::npos) << message;
  EXPECT_EQ(found["node0"]["severity"], "error");
  EXPECT_NE(found["node0"]["message"].get<std::string>().find("mlx5_0/1 link_downed +"),
            std::string::npos)
      << found["node0"].dump();
  EXPECT_EQ(r.status, 1) << r.text;
  EXPECT_NE(test::ReadText(good).find("# excluded node0: node node0: link errors grew in "),
            std::string::npos)
      << test::ReadText(good);
  // The counts themselves are in the report, as the doctor's own probe read them.
  const auto& ports = r.doc["nodes"][1]["facts"]["health"]["infiniband"];
  ASSERT_EQ(ports.size(), 1u) << r.text;
  EXPECT_GT(ports[0]["counters"]["symbol_error"].get<long long>(), 0) << ports.dump();
  EXPECT_EQ(ports[0]["counters"]["link_downed"], 0) << ports.dump();
}

// Ctrl-C while the test runs, node1's rank of it stopped (SIGSTOP: a node that stops answering
// mid-collective): the doctor stops the test job at once and judges nothing of it. No pair is
// slow, no node is bad, no hostfile is written, and nothing is left on the nodes.
TEST(DoctorBandwidthCluster, CtrlCDuringTheTestJudgesNoNodeAndWritesNoHostfile) {
  SshTestCluster cluster("doctor-bandwidth-int", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string good = cluster.dir() + "/good.txt";
  std::filesystem::remove(good);
  testing::DtrainProcess doctor({"doctor", "--json", "--bandwidth", "--bandwidth-mib", "4",
                                 "--exclude-bad", "-o", good, "-c", cluster.cluster_file()},
                                cluster.dir(), {"NO_COLOR=1"});
  test::ExpectTestCutShortByCtrlC(cluster, 2, doctor, "bandwidth", "bandwidth", good);
}

}  // namespace
}  // namespace dtrain
