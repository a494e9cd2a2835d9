// `dtrain timeline` for an ssh job whose ranks wrote their traces on their own nodes' disks: the
// real launcher starts ranks on sshd nodes in network namespaces, each node with a private tmpfs
// over the job's log folder (in its own mount namespace), so no trace reaches this machine until
// `dtrain timeline` fetches it. Then a stale local copy is refreshed, and nodes that cannot be
// reached are warnings naming them and their ranks.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/node_clock.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using test::ReadText;
using test::RunOutput;
using test::SshTestCluster;

const std::string kDtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";
constexpr int kSpans = 20000;  // per rank: about 2 MB of trace, many SSH windows

struct CommandRun {
  std::string output;  // stdout and stderr
  int status = -1;
};

CommandRun Dtrain(const std::string& args) {
  CommandRun r;
  r.output = RunOutput(kDtrain + " " + args + " 2>&1; echo \"status=$?\"");
  const size_t at = r.output.rfind("status=");
  if (at != std::string::npos) r.status = std::stoi(r.output.substr(at + 7));
  return r;
}

std::string SshdPid(const SshTestCluster& cluster, int node) {
  std::string pid = ReadText(cluster.dir() + "/node" + std::to_string(node) + "/sshd.pid");
  while (!pid.empty() && pid.back() == '\n') pid.pop_back();
  return pid;
}

// Runs `command` in node i's mount namespace (the one its sshd and every session live in).
std::string OnNode(const SshTestCluster& cluster, int node, const std::string& command) {
  return RunOutput("nsenter -t " + SshdPid(cluster, node) + " -m sh -c '" + command +
                   "' 2>&1; echo rc=$?");
}

// A rank program writing a Horovod-style trace at $DTRAIN_TIMELINE, as dtrain-clip does: the
// process_name record with the start time, rank and host, the clock offset to rank 0 (the
// nodes share this machine's clock), a fusion-buffer track, kSpans ALLREDUCE spans.
std::string WriteRankProgram(const std::string& dir) {
  const std::string path = dir + "/write-trace.sh";
  std::ofstream(path)
      << "set -e\nmkdir -p \"$(dirname \"$DTRAIN_TIMELINE\")\"\n"
      << "awk -v rank=\"$RANK\" -v host=\"$(hostname)\" -v start=\"$(date +%s)000000\" "
      << "-v n=" << kSpans << " 'BEGIN {\n"
      << "  printf \"[\\n{\\\"name\\\":\\\"process_name\\\",\\\"ph\\\":\\\"M\\\",\\\"pid\\\":0,"
      << "\\\"args\\\":{\\\"name\\\":\\\"rank %d\\\",\\\"start_time_since_epoch_in_micros\\\":%s,"
      << "\\\"rank\\\":%d,\\\"host\\\":\\\"%s\\\"}}\", rank, start, rank, host\n"
      << "  printf \",\\n{\\\"name\\\":\\\"clock_offset\\\",\\\"ph\\\":\\\"M\\\",\\\"pid\\\":0,"
      << "\\\"args\\\":{\\\"clock_offset_us\\\":0,\\\"clock_rtt_us\\\":40}}\"\n"
      << "  printf \",\\n{\\\"name\\\":\\\"process_name\\\",\\\"ph\\\":\\\"M\\\",\\\"pid\\\":1,"
      << "\\\"args\\\":{\\\"name\\\":\\\"fusion.0\\\"}}\"\n"
      << "  for (i = 0; i < n; i++) {\n"
      << "    printf \",\\n{\\\"ph\\\":\\\"B\\\",\\\"name\\\":\\\"ALLREDUCE\\\",\\\"ts\\\":%d,"
      << "\\\"pid\\\":1,\\\"args\\\":{\\\"bytes\\\":4096}}\", i * 10\n"
      << "    printf \",\\n{\\\"ph\\\":\\\"E\\\",\\\"ts\\\":%d,\\\"pid\\\":1}\", i * 10 + 5\n"
      << "  }\n  printf \"\\n]\\n\"\n}' >\"$DTRAIN_TIMELINE\"\n";
  return path;
}

// The merged trace's process names and ALLREDUCE span count by pid.
struct MergedRanks {
  std::map<int, std::string> names;
  std::map<int, int> spans;
};

MergedRanks ReadMerged(const std::string& path) {
  MergedRanks out;
  std::ifstream in(path);
  nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (!doc.is_array()) return out;
  for (const auto& record : doc) {
    const int pid = record.value("pid", -1);
    if (record.value("name", "") == "process_name" && record.value("ph", "") == "M") {
      out.names[pid] = record["args"].value("name", "");
    } else if (record.value("ph", "") == "B" && record.value("name", "") == "ALLREDUCE") {
      ++out.spans[pid];
    }
  }
  return out;
}

TEST(TimelineFetch, TracesOnTheNodesOwnDisksAreFetchedThenMerged) {
  SshTestCluster cluster("tl-fetch", 2, 2);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = cluster.dir() + "/logs";
  fs::create_directories(logs);
  for (int node = 0; node < 2; ++node) {
    const std::string mounted = OnNode(cluster, node, "mount -t tmpfs tmpfs " + logs);
    ASSERT_NE(mounted.find("rc=0"), std::string::npos) << mounted;
  }
  const std::string program = WriteRankProgram(cluster.dir());
  const CommandRun launch = Dtrain("launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                                   " --job fetch --timeline -q -- sh " + program);
  ASSERT_EQ(launch.status, 0) << launch.output;
  const std::string timeline = logs + "/fetch/timeline";
  for (int rank = 0; rank < 4; ++rank) {  // the traces are on the nodes only
    ASSERT_FALSE(fs::exists(timeline + "/rank-" + std::to_string(rank) + ".json"));
  }

  // 1. Every trace is fetched, byte for byte, and each rank is its own process.
  CommandRun merged = Dtrain("timeline --log-dir " + logs + " --job fetch");
  ASSERT_EQ(merged.status, 0) << merged.output;
  EXPECT_NE(merged.output.find("fetched 4 traces"), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("merged 4 ranks"), std::string::npos) << merged.output;
  EXPECT_EQ(merged.output.find("warning"), std::string::npos) << merged.output;
  for (int rank = 0; rank < 4; ++rank) {
    const std::string file = timeline + "/rank-" + std::to_string(rank) + ".json";
    const std::string remote = OnNode(cluster, rank / 2, "md5sum < " + file);
    EXPECT_EQ(remote, RunOutput("md5sum < " + file) + "rc=0\n") << "rank " << rank;
  }
  MergedRanks ranks = ReadMerged(logs + "/fetch/timeline.json");
  ASSERT_EQ(ranks.names.size(), 4u) << merged.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(ranks.names[rank],
              "rank " + std::to_string(rank) + " (node" + std::to_string(rank / 2) + ")");
    EXPECT_EQ(ranks.spans[rank], kSpans) << "rank " << rank;
  }
  for (const auto& entry : fs::directory_iterator(timeline)) {
    EXPECT_EQ(entry.path().filename().string().rfind(".rank-", 0), std::string::npos)
        << "a temporary file was left: " << entry.path();
  }

  // 2. Complete local copies are kept; one cut short (a copy taken while the rank still wrote)
  // is fetched again.
  fs::resize_file(timeline + "/rank-3.json", 1000);
  // A temporary file left by a fetch that was killed (its process is gone) is removed; one of a
  // fetch still running (this process stands in for it) is left alone.
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  const std::string abandoned = timeline + "/.rank-2.json.fetch-" + std::to_string(gone);
  const std::string live = timeline + "/.rank-2.json.fetch-" + std::to_string(getpid());
  std::ofstream(abandoned) << "[";
  std::ofstream(live) << "[";
  merged = Dtrain("timeline --log-dir " + logs + " --job fetch");
  ASSERT_EQ(merged.status, 0) << merged.output;
  EXPECT_NE(merged.output.find("fetched 1 trace "), std::string::npos) << merged.output;
  EXPECT_EQ(ReadMerged(logs + "/fetch/timeline.json").spans[3], kSpans) << merged.output;
  EXPECT_FALSE(fs::exists(abandoned));
  EXPECT_TRUE(fs::exists(live));
  fs::remove(live);

  // 3. While the job runs (job.json says so), a local trace may be the file a rank is writing:
  // it is never replaced, only missing ones are fetched.
  const std::string record = logs + "/fetch/job.json";
  const std::string ended = ReadText(record);
  nlohmann::json running = nlohmann::json::parse(ended);
  running["status"] = "running";
  std::ofstream(record) << running.dump(2);
  fs::resize_file(timeline + "/rank-0.json", 1000);
  fs::remove(timeline + "/rank-1.json");
  merged = Dtrain("timeline --log-dir " + logs + " --job fetch");
  ASSERT_EQ(merged.status, 0) << merged.output;
  EXPECT_NE(merged.output.find("fetched 1 trace "), std::string::npos) << merged.output;
  EXPECT_EQ(fs::file_size(timeline + "/rank-0.json"), 1000u);
  EXPECT_EQ(ReadMerged(logs + "/fetch/timeline.json").spans[1], kSpans) << merged.output;
  std::ofstream(record) << ended;
  merged = Dtrain("timeline --log-dir " + logs + " --job fetch");  // ended: rank 0 is complete
  EXPECT_NE(merged.output.find("fetched 1 trace "), std::string::npos) << merged.output;
  EXPECT_EQ(ReadMerged(logs + "/fetch/timeline.json").spans[0], kSpans) << merged.output;

  // 4. node1 is gone and its traces are not here: a warning naming it and its ranks, and the
  // merge goes on with node0's ranks.
  fs::remove(timeline + "/rank-2.json");
  fs::remove(timeline + "/rank-3.json");
  RunOutput("kill " + SshdPid(cluster, 1));
  merged = Dtrain("timeline --log-dir " + logs + " --job fetch");
  ASSERT_EQ(merged.status, 0) << merged.output;
  EXPECT_NE(merged.output.find("warning: node node1 (10.231.0.11): ssh:"), std::string::npos)
      << merged.output;
  EXPECT_NE(merged.output.find("traces of ranks 2, 3 not fetched"), std::string::npos)
      << merged.output;
  EXPECT_NE(merged.output.find("merged 2 ranks"), std::string::npos) << merged.output;
  EXPECT_EQ(ReadMerged(logs + "/fetch/timeline.json").names.size(), 2u);

  // 5. --no-fetch merges what is here without asking any node; the ranks without a trace are
  // named, not dropped silently.
  merged = Dtrain("timeline --no-fetch --log-dir " + logs + " --job fetch");
  ASSERT_EQ(merged.status, 0) << merged.output;
  EXPECT_EQ(merged.output.find("ssh:"), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("rank 2: no trace"), std::string::npos) << merged.output;
  EXPECT_NE(merged.output.find("merged 2 ranks"), std::string::npos) << merged.output;

  // 6. No node reachable and no trace here: an error that says why.
  fs::remove(timeline + "/rank-0.json");
  fs::remove(timeline + "/rank-1.json");
  RunOutput("kill " + SshdPid(cluster, 0));
  merged = Dtrain("timeline --log-dir " + logs + " --job fetch");
  EXPECT_EQ(merged.status, 1) << merged.output;
  EXPECT_NE(merged.output.find("fetching them from the nodes failed"), std::string::npos)
      << merged.output;
  EXPECT_NE(merged.output.find("node node0"), std::string::npos) << merged.output;
}

// A PyTorch job on nodes with private storage (/srv/node): each rank exports its profiler trace
// into $DTRAIN_TRACE_DIR on its own node. The launch measures every node's clock (the namespaces
// share this machine's kernel clock, so the offsets are 0 within their round trips) and brings
// the traces back at the end; `dtrain timeline` fetches one that went missing here again.
TEST(TimelineFetch, PyTorchTracesOfPrivateNodesAreFetchedAndNodeClocksMeasured) {
  const std::string fixtures = std::string(DTRAIN_SOURCE_DIR) + "/tests/fixtures/kineto";
  ASSERT_TRUE(fs::exists(fixtures + "/ddp-2ranks-gloo-rank0.json.gz")) << "missing " << fixtures;
  SshTestCluster cluster("tl-kineto", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string logs = "/srv/node/tl-kineto-logs";  // private on every node
  fs::remove_all(logs);
  const std::string program = cluster.dir() + "/export-trace.sh";
  std::ofstream(program) << "set -e\nmkdir -p \"$DTRAIN_TRACE_DIR\"\ncp " << fixtures
                         << "/ddp-2ranks-gloo-rank$RANK.json.gz "
                         << "\"$DTRAIN_TRACE_DIR/pytorch-rank$RANK.json.gz\"\n";
  const CommandRun launch = Dtrain("launch -c " + cluster.cluster_file() + " --log-dir " + logs +
                                   " --job profiled -q -- sh " + program);
  ASSERT_EQ(launch.status, 0) << launch.output;
  EXPECT_EQ(launch.output.find("warning"), std::string::npos) << launch.output;

  // Every node's clock, measured over its ssh connection.
  const nlohmann::json job = nlohmann::json::parse(ReadText(logs + "/profiled/job.json"));
  ASSERT_EQ(job["nodes"].size(), 2u);
  for (const nlohmann::json& node : job["nodes"]) {
    ASSERT_TRUE(node.contains("clock_offset_us") && node.contains("clock_rtt_us")) << node.dump();
    const int64_t offset = node["clock_offset_us"];
    const int64_t rtt = node["clock_rtt_us"];
    EXPECT_GT(rtt, 0) << node.dump();
    EXPECT_LT(rtt, 200000) << node.dump();
    EXPECT_LE(std::abs(offset), rtt / 2 + 1) << node.dump();
    std::printf("%s: clock offset %lld us, round trip %lld us\n",
                node["host"].get<std::string>().c_str(), static_cast<long long>(offset),
                static_cast<long long>(rtt));
  }
  // Measuring costs well under a second, connections included, for all nodes at once.
  std::vector<std::string> warnings;
  const auto start = std::chrono::steady_clock::now();
  const std::map<std::string, NodeClock> clocks = MeasureNodeClocks(cluster.Spec(), warnings);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(clocks.size(), 2u) << (warnings.empty() ? "" : warnings.front());
  EXPECT_LT(seconds, 1.0);
  std::printf("measuring 2 nodes took %.3f s\n", seconds);

  // The traces came back at the end of the job, byte for byte.
  const std::string timeline = logs + "/profiled/timeline";
  for (int rank = 0; rank < 2; ++rank) {
    const std::string name = "/pytorch-rank" + std::to_string(rank) + ".json.gz";
    ASSERT_TRUE(fs::exists(timeline + name)) << launch.output;
    EXPECT_EQ(RunOutput("md5sum < " + timeline + name),
              RunOutput("md5sum < " + fixtures + "/ddp-2ranks-gloo-rank" + std::to_string(rank) +
                        ".json.gz"));
  }

  // One missing here: `dtrain timeline` fetches it again, then summarizes both ranks.
  fs::remove(timeline + "/pytorch-rank1.json.gz");
  CommandRun summary = Dtrain("timeline --summary --json --log-dir " + logs + " --job profiled");
  ASSERT_EQ(summary.status, 0) << summary.output;
  const size_t json_at = summary.output.find('{');
  ASSERT_NE(json_at, std::string::npos) << summary.output;
  const nlohmann::json doc = nlohmann::json::parse(
      summary.output.substr(json_at, summary.output.rfind('}') + 1 - json_at), nullptr, false);
  ASSERT_TRUE(doc.is_object()) << summary.output;
  std::map<int, std::string> ranks;
  for (const nlohmann::json& r : doc["ranks"]) ranks[r["rank"]] = r["host"];
  EXPECT_EQ(ranks, (std::map<int, std::string>{{0, "node0"}, {1, "node1"}})) << summary.output;
  EXPECT_TRUE(doc["warnings"].empty()) << summary.output;
  EXPECT_TRUE(fs::exists(timeline + "/pytorch-rank1.json.gz"));
  fs::remove_all(logs);
}

// A node slow to log in: what goes towards it held to 8 kbit/s (tbf on its port of the bridge),
// so the few KB of its login take longer than the 1.5 s its pings get once logged in. It is
// still measured. And NodeClockProbe::Take(), which the launch calls when its first attempt
// ends, gives a node still logging in 1.5 s more, not the rest of its login.
TEST(NodeClockSsh, ANodeSlowToLogInIsMeasuredAndTakeWaitsLittleForOneStillLoggingIn) {
  SshTestCluster cluster("clock-slow", 2, 1);
  REQUIRE_CLUSTER(cluster);
  const std::string slowed =
      RunOutput("tc qdisc add dev nd1 root tbf rate 8kbit burst 1600 latency 30s 2>&1; echo rc=$?");
  ASSERT_NE(slowed.find("rc=0"), std::string::npos) << slowed;
  std::vector<std::string> warnings;
  const auto start = std::chrono::steady_clock::now();
  const std::map<std::string, NodeClock> clocks = MeasureNodeClocks(cluster.Spec(), warnings);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(seconds, 1.5) << "the slowed login was not slow: this test proves nothing";
  ASSERT_EQ(clocks.count("node1"), 1u) << (warnings.empty() ? "" : warnings.front());
  const NodeClock& slow = clocks.at("node1");
  EXPECT_GT(slow.rtt_us, 0);
  EXPECT_LE(std::abs(slow.offset_us), slow.rtt_us / 2 + 1);
  std::printf("node1 measured after %.2f s: offset %lld us, round trip %lld us\n", seconds,
              static_cast<long long>(slow.offset_us), static_cast<long long>(slow.rtt_us));

  NodeClockProbe probe(cluster.Spec());
  const auto asked = std::chrono::steady_clock::now();
  std::vector<std::string> notes;
  const std::map<std::string, NodeClock> taken = probe.Take(notes);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count(), 2.5);
  EXPECT_EQ(taken.count("node1"), 0u);
  std::string said;
  for (const std::string& n : notes) said += n + "\n";
  EXPECT_NE(said.find("node node1: clock offset not measured (no answer by 1.5 s after the job's "
                      "first attempt ended)"),
            std::string::npos)
      << said;
  RunOutput("tc qdisc del dev nd1 root");
}

}  // namespace
}  // namespace dtrain
