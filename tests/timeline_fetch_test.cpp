// `dtrain timeline` for an ssh job whose ranks wrote their traces on their own nodes' disks: the
// real launcher starts ranks on sshd nodes in network namespaces, each node with a private tmpfs
// over the job's log folder (in its own mount namespace), so no trace reaches this machine until
// `dtrain timeline` fetches it. Then a stale local copy is refreshed, and nodes that cannot be
// reached are warnings naming them and their ranks.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/ssh_cluster.h"

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

}  // namespace
}  // namespace dtrain
