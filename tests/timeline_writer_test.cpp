// The per-rank writer: Horovod's record shape, valid JSON whenever it is read, a readable file
// after kill -9, and no file at all when it is not opened.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/timeline/trace_reader.h"
#include "runtime/trace/timeline.h"
#include "tests/support/timeline_test_files.h"
#include "tests/support/tmpfs_disk.h"

namespace dtrain {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::ScratchDir;

TEST(TimelineWriter, HeaderHasHorovodStartTimeRankHostAndClockOffset) {
  ScratchDir dir;
  std::string path = dir / "rank-3.json";
  clip::Timeline t;
  t.SetClockOffset(-1234, 56);  // before Open, as at rendezvous
  t.Open(path, 3, "node-b", false);
  t.Begin("compute", "FORWARD");
  t.End("compute", "FORWARD");
  t.Close();
  json trace = json::parse(ReadFile(path));
  ASSERT_TRUE(trace.is_array());
  const json& head = trace[0];
  EXPECT_EQ(head["name"], "process_name");
  EXPECT_EQ(head["ph"], "M");
  EXPECT_EQ(head["pid"], 0);
  int64_t start = head["args"]["start_time_since_epoch_in_micros"];
  int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  EXPECT_LE(start, now);
  EXPECT_GT(start, now - 60'000'000);
  EXPECT_EQ(head["args"]["rank"], 3);
  EXPECT_EQ(head["args"]["host"], "node-b");
  bool offset_seen = false;
  std::vector<std::string> phases;
  for (const json& r : trace) {
    if (r["name"] == "clock_offset") {
      offset_seen = true;
      EXPECT_EQ(r["args"]["clock_offset_us"], -1234);
      EXPECT_EQ(r["args"]["clock_rtt_us"], 56);
    }
    if (r["ph"] != "M") {
      phases.push_back(r["ph"]);
      EXPECT_TRUE(r["ts"].is_number_integer());
      EXPECT_EQ(r["name"], "FORWARD");
    }
  }
  EXPECT_TRUE(offset_seen);
  EXPECT_EQ(phases, (std::vector<std::string>{"B", "E"}));
}

TEST(TimelineWriter, ValidJsonAfterEveryFlushWithSeveralThreadsRecording) {
  ScratchDir dir;
  std::string path = dir / "rank-0.json";
  clip::Timeline t;
  t.Open(path, 0, "h", true);
  constexpr int kThreads = 3;
  constexpr int kRounds = 5;
  constexpr int kSpans = 200;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::thread> threads;
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&t, k] {
        std::string track = "tensor.\"" + std::to_string(k) + "\"";  // needs escaping
        for (int i = 0; i < kSpans; ++i) {
          t.Begin(track, "NCCL_ALLREDUCE", "\"bytes\": 4");
          t.End(track, "NCCL_ALLREDUCE");
        }
      });
    }
    for (auto& th : threads) th.join();
    t.Instant("", "CYCLE_START");
    t.Flush();
    json trace = json::parse(ReadFile(path));  // throws if not valid JSON
    size_t spans = 0;
    int64_t last_ts = 0;
    for (const json& r : trace) {
      if (r["ph"] == "B") ++spans;
      if (r.contains("ts")) {
        EXPECT_GE(r["ts"].get<int64_t>(), last_ts) << "file order is timestamp order";
        last_ts = r["ts"];
      }
    }
    EXPECT_EQ(spans, static_cast<size_t>((round + 1) * kThreads * kSpans));
  }
  t.Close();
  // Track names come back unescaped as process names (one process per track, as Horovod).
  json trace = json::parse(ReadFile(path));
  std::map<std::string, int> names;
  for (const json& r : trace) {
    if (r["name"] == "process_name" && r["pid"] != 0) names[r["args"]["name"]] = r["pid"];
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kThreads));
  EXPECT_TRUE(names.count("tensor.\"0\""));
}

TEST(TimelineWriter, KilledWriterLeavesAParseableTrace) {
  ScratchDir dir;
  std::string path = dir / "rank-1.json";
  pid_t child = ::fork();
  if (child == 0) {
    clip::Timeline t;
    t.Open(path, 1, "h", false);
    // Until killed; bounded so that a failing test never leaves it behind.
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < end) testing::RecordStep(t, 4096);
    ::_exit(0);
  }
  // Wait until several batches are on disk, then kill without warning.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::error_code ec;
  while (std::filesystem::file_size(path, ec) < 20000 || ec) {
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  std::string text = ReadFile(path);
  ASSERT_GT(text.size(), 20000u);
  json trace = json::parse(text);  // whole array, closed
  EXPECT_GT(trace.size(), 100u);
  TraceReader reader(path);
  json record;
  size_t n = 0;
  while (reader.Next(record)) ++n;
  EXPECT_EQ(n, trace.size());
  EXPECT_FALSE(reader.truncated());
}

TEST(TimelineWriter, CreatesTheTraceFolder) {
  ScratchDir dir;
  clip::Timeline t;
  t.Open(dir / "job/timeline/rank-0.json", 0, "h", false);
  EXPECT_TRUE(t.enabled());
  t.Close();
  EXPECT_TRUE(std::filesystem::exists(dir / "job/timeline/rank-0.json"));
}

TEST(TimelineWriter, NothingHappensUntilOpened) {
  ScratchDir dir;
  clip::Timeline t;
  EXPECT_FALSE(t.enabled());
  t.Begin("compute", "FORWARD");
  t.End("compute", "FORWARD");
  t.Flush();
  t.Close();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(TimelineWriter, OpenFromEnvironmentFollowsDtrainThenHorovodRankZeroOnly) {
  ScratchDir dir;
  ::unsetenv("DTRAIN_TIMELINE");
  ::setenv("HOROVOD_TIMELINE", (dir / "hvd.json").c_str(), 1);
  ::setenv("HOROVOD_TIMELINE_MARK_CYCLES", "1", 1);
  {
    clip::Timeline t;
    EXPECT_FALSE(t.OpenFromEnvironment(1, "h"));  // Horovod: rank 0 only
    EXPECT_TRUE(t.OpenFromEnvironment(0, "h"));
    EXPECT_TRUE(t.mark_cycles());
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "hvd.json"));
  ::setenv("DTRAIN_TIMELINE", (dir / "rank-1.json").c_str(), 1);
  ::setenv("HOROVOD_TIMELINE_MARK_CYCLES", "0", 1);
  {
    clip::Timeline t;
    EXPECT_TRUE(t.OpenFromEnvironment(1, "h"));
    EXPECT_FALSE(t.mark_cycles());
  }
  {
    clip::Timeline t;  // --timeline-mark-cycles marks cycles whatever the environment says
    EXPECT_TRUE(t.OpenFromEnvironment(1, "h", {}, /*mark_cycles=*/true));
    EXPECT_TRUE(t.mark_cycles());
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "rank-1.json"));
  ::unsetenv("DTRAIN_TIMELINE");
  ::unsetenv("HOROVOD_TIMELINE");
  ::unsetenv("HOROVOD_TIMELINE_MARK_CYCLES");
}

TEST(TimelineWriter, UnwritablePathDisablesTheTimelineWithoutFailing) {
  ScratchDir dir;
  testing::WriteFile(dir / "not-a-folder", "x");
  clip::Timeline t;
  t.Open(dir / "not-a-folder/rank-0.json", 0, "h", false);
  EXPECT_FALSE(t.enabled());
  t.Begin("compute", "FORWARD");  // a no-op
}

// A disk that fills up under the trace: the chunk it refused goes, and the trace ends where the
// last whole chunk did, still valid JSON, said on stderr (root: a tmpfs of the test's own).
TEST(TimelineWriter, AFullDiskEndsTheTraceWithTheLastWholeChunk) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a mount)";
  ScratchDir dir;
  const std::string mount = dir / "disk";
  const testing::TmpfsDisk disk(mount, "256k");
  ASSERT_EQ(disk.error(), "");
  const std::string path = mount + "/rank-0.json";
  clip::Timeline t;
  t.Open(path, 0, "h", false);
  const auto spans = [&](int n) {
    for (int i = 0; i < n; ++i) {
      t.Begin("compute", "FORWARD", "\"bytes\": 4");
      t.End("compute", "FORWARD");
    }
    t.Flush();
  };
  spans(50);
  const size_t before = json::parse(ReadFile(path)).size();
  disk.Fill();
  ::testing::internal::CaptureStderr();
  spans(500);  // more than the last page's room
  spans(10);   // nothing more is written
  t.Close();
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string text = ReadFile(path);
  EXPECT_NE(err.find("timeline " + path +
                     ": write failed (No space left on device); trace stops "
                     "here, with what was written before"),
            std::string::npos)
      << err;
  const json trace = json::parse(text, nullptr, false);
  ASSERT_TRUE(trace.is_array()) << text.substr(text.size() > 200 ? text.size() - 200 : 0);
  // The chunks the disk took whole are there (the writer writes in batches), the rest is not.
  EXPECT_GE(trace.size(), before);
  EXPECT_LT(trace.size(), before + 1000);
}

}  // namespace
}  // namespace dtrain
