// The merge on traces from the real writer in separate processes, on Horovod's own files, on a
// file cut short by a killed rank, and on an input much larger than the merge's memory.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/error.h"
#include "launcher/timeline/timeline_merge.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

using nlohmann::json;
using testing::ReadFile;
using testing::ScratchDir;
using testing::WriteFile;

// What a merged trace holds, checked for the rules every merged trace must keep.
struct MergedTraceFacts {
  std::map<int, std::string> process_names;                 // pid -> name
  std::map<std::pair<int, int>, std::string> thread_names;  // (pid, tid) -> name
  size_t spans = 0;
  size_t instants = 0;
};

MergedTraceFacts CheckMergedTrace(const std::string& path) {
  json trace = json::parse(ReadFile(path));  // valid JSON, or the test fails here
  EXPECT_TRUE(trace.is_array());
  MergedTraceFacts facts;
  std::map<std::pair<int, int>, std::vector<std::string>> open;
  std::map<std::pair<int, int>, int64_t> last_ts;
  for (const json& r : trace) {
    std::string ph = r["ph"];
    int pid = r["pid"];
    if (ph == "M") {
      if (r["name"] == "process_name") facts.process_names[pid] = r["args"]["name"];
      if (r["name"] == "thread_name") facts.thread_names[{pid, r["tid"]}] = r["args"]["name"];
      continue;
    }
    std::pair<int, int> thread{pid, r["tid"]};
    int64_t ts = r["ts"];
    EXPECT_GE(ts, 0);
    if (last_ts.count(thread)) {
      EXPECT_GE(ts, last_ts[thread]) << "not monotonic: " << r.dump();
    }
    last_ts[thread] = ts;
    EXPECT_TRUE(facts.process_names.count(pid)) << "process named before use: " << r.dump();
    if (ph == "B") {
      open[thread].push_back(r["name"]);
      ++facts.spans;
    } else if (ph == "E") {
      EXPECT_FALSE(open[thread].empty()) << "E without B: " << r.dump();
      if (open[thread].empty()) continue;
      EXPECT_EQ(r["name"], open[thread].back());
      open[thread].pop_back();
    } else if (ph == "i") {
      ++facts.instants;
    }
  }
  for (auto& [thread, names] : open) EXPECT_TRUE(names.empty()) << "B without E";
  return facts;
}

TEST(TimelineMerge, RealRanksBecomeProcessesWithTrackThreads) {
  ScratchDir dir;
  testing::WriteRankTrace(dir / "rank-0.json", 0, "node-a", 0, 4);
  testing::WriteRankTrace(dir / "rank-1.json", 1, "node-b", -800, 4);
  MergeResult result =
      MergeTimelines({dir / "rank-0.json", dir / "rank-1.json"}, dir / "timeline.json", {});
  EXPECT_TRUE(result.warnings.empty()) << result.warnings.front();
  MergedTraceFacts facts = CheckMergedTrace(dir / "timeline.json");
  EXPECT_EQ(facts.process_names,
            (std::map<int, std::string>{{0, "rank 0 (node-a)"}, {1, "rank 1 (node-b)"}}));
  for (int rank : {0, 1}) {
    std::set<std::string> threads;
    for (auto& [key, name] : facts.thread_names) {
      if (key.first == rank) threads.insert(name);
    }
    EXPECT_TRUE(threads.count("compute"));
    EXPECT_TRUE(threads.count("fusion.0"));
    EXPECT_TRUE(threads.count("markers"));  // CYCLE_START
  }
  EXPECT_EQ(facts.spans, 2u * 4u * 7u);
  EXPECT_EQ(facts.instants, 2u * 4u);
  ASSERT_EQ(result.ranks.size(), 2u);
  EXPECT_TRUE(result.ranks[1].has_clock_offset);
  EXPECT_EQ(result.ranks[1].clock_offset_us, -800);
}

// Two hand-written ranks whose clocks disagree by a known amount.
TEST(TimelineMerge, PutsEveryRankOnRankZerosClock) {
  ScratchDir dir;
  auto rank = [](int r, int64_t start, int64_t offset) {
    return "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
           "{\"start_time_since_epoch_in_micros\": " +
           std::to_string(start) + ", \"rank\": " + std::to_string(r) +
           ", \"host\": \"h\"}},\n{\"name\": \"clock_offset\", \"ph\": \"M\", \"pid\": 0, "
           "\"args\": {\"clock_offset_us\": " +
           std::to_string(offset) +
           ", \"clock_rtt_us\": 9}},\n{\"ph\": \"B\", \"name\": \"FORWARD\", \"ts\": 10, "
           "\"pid\": 1},\n{\"ph\": \"E\", \"ts\": 20, \"pid\": 1}\n]";
  };
  // Rank 1 started 1 s later by its own clock, which runs 400 us ahead of rank 0's.
  WriteFile(dir / "a.json", rank(0, 7'000'000, 0));
  WriteFile(dir / "b.json", rank(1, 8'000'000, -400));
  MergeResult result = MergeTimelines({dir / "b.json", dir / "a.json"}, dir / "m.json", {});
  json merged = json::parse(ReadFile(dir / "m.json"));
  std::map<int, std::vector<int64_t>> ts;
  for (const json& r : merged) {
    if (r["ph"] != "M") ts[r["pid"]].push_back(r["ts"]);
    if (r["name"] == "process_name") {
      EXPECT_EQ(r["args"]["start_time_since_epoch_in_micros"], 7'000'000);
    }
  }
  EXPECT_EQ(ts[0], (std::vector<int64_t>{10, 20}));
  EXPECT_EQ(ts[1], (std::vector<int64_t>{999'610, 999'620}));
  EXPECT_EQ(result.ranks[1].shift_us, 999'600);
}

TEST(TimelineMerge, TruncatedRankFileIsMergedWithAWarning) {
  ScratchDir dir;
  testing::WriteRankTrace(dir / "rank-0.json", 0, "node-a", 0, 3);
  testing::WriteRankTrace(dir / "rank-1.json", 1, "node-b", 0, 3);
  // Cut rank 1 inside the record after the one that begins its second BACKWARD, as a kill -9
  // in the middle of a write by a plain writer would.
  std::string text = ReadFile(dir / "rank-1.json");
  const std::string backward = "\"B\", \"name\": \"BACKWARD\"";
  size_t second = text.find(backward, text.find(backward) + 1);
  ASSERT_NE(second, std::string::npos);
  size_t next_record = text.find("{\"ph\"", second);
  ASSERT_NE(next_record, std::string::npos);
  std::filesystem::resize_file(dir / "rank-1.json", next_record + 5);
  MergeResult result =
      MergeTimelines({dir / "rank-0.json", dir / "rank-1.json"}, dir / "timeline.json", {});
  ASSERT_FALSE(result.warnings.empty());
  std::string all;
  for (const std::string& w : result.warnings) all += w + "\n";
  EXPECT_NE(all.find("rank 1: "), std::string::npos) << all;
  EXPECT_NE(all.find("cut short"), std::string::npos) << all;
  EXPECT_NE(all.find("never ended"), std::string::npos) << all;
  EXPECT_TRUE(result.ranks[1].truncated);
  EXPECT_FALSE(result.ranks[0].truncated);
  MergedTraceFacts facts = CheckMergedTrace(dir / "timeline.json");  // B/E balanced again
  EXPECT_EQ(facts.process_names.size(), 2u);
  EXPECT_GT(facts.spans, 3u * 7u);
  EXPECT_LT(facts.spans, 2u * 3u * 7u);
}

// Horovod's rank-0 timeline as its writer lays it out: tensors as processes, E without a name,
// negotiation X records named after ranks, CYCLE_START markers without a pid.
const char* kHorovodTimeline = R"([
{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros":1700000000000000}},
{"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
{"ph": "i", "name": "CYCLE_START", "ts": 5, "s": "g"},
{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "DistributedSGD_Allreduce/grad_dense_0"}},
{"name": "process_sort_index", "ph": "M", "pid": 1, "args": {"sort_index": 1}},
{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 10, "pid": 1},
{"ph": "X", "name": "0", "ts": 11, "pid": 1, "dur": 0},
{"ph": "X", "name": "1", "ts": 40, "pid": 1, "dur": 0},
{"ph": "E", "ts": 40, "pid": 1},
{"ph": "B", "name": "ALLREDUCE", "ts": 41, "pid": 1},
{"ph": "B", "name": "QUEUE", "ts": 41, "pid": 1},
{"ph": "E", "ts": 45, "pid": 1},
{"ph": "B", "name": "MEMCPY_IN_FUSION_BUFFER", "ts": 45, "pid": 1},
{"ph": "E", "ts": 50, "pid": 1},
{"ph": "B", "name": "NCCL_ALLREDUCE", "ts": 50, "pid": 1},
{"ph": "E", "ts": 90, "pid": 1},
{"ph": "B", "name": "MEMCPY_OUT_FUSION_BUFFER", "ts": 90, "pid": 1},
{"ph": "E", "ts": 95, "pid": 1},
{"ph": "E", "ts": 96, "pid": 1, "args": {"dtype": "float32", "shape": "[256, 128]"}}])";

TEST(TimelineMerge, ReadsHorovodTimelinesClosedOrNot) {
  ScratchDir dir;
  WriteFile(dir / "horovod_timeline.json", kHorovodTimeline);
  // Older Horovod writers end every record with ",\n" and never close the array.
  std::string old_style = kHorovodTimeline;
  old_style.back() = ',';
  old_style += "\n";
  WriteFile(dir / "old_horovod.json", old_style);
  for (const char* name : {"horovod_timeline.json", "old_horovod.json"}) {
    MergeResult result = MergeTimelines({dir / name}, dir / "m.json", {});
    EXPECT_TRUE(result.warnings.empty()) << name << ": " << result.warnings.front();
    MergedTraceFacts facts = CheckMergedTrace(dir / "m.json");
    EXPECT_EQ(facts.process_names, (std::map<int, std::string>{{0, "rank 0"}}));
    EXPECT_EQ(facts.thread_names[std::make_pair(0, 1)], "DistributedSGD_Allreduce/grad_dense_0");
    EXPECT_EQ(facts.spans, 6u);
    EXPECT_EQ(facts.instants, 1u);
    EXPECT_EQ(result.events, 15u);
  }
}

TEST(TimelineMerge, NamesRanksFromTheJobWhenTheTraceDoesNot) {
  ScratchDir dir;
  WriteFile(dir / "rank-2.json", kHorovodTimeline);
  MergeResult result = MergeTimelines({dir / "rank-2.json"}, dir / "m.json", {}, {{2, "gpu-c"}});
  EXPECT_EQ(CheckMergedTrace(dir / "m.json").process_names,
            (std::map<int, std::string>{{2, "rank 2 (gpu-c)"}}));
}

// The job's name for a node is the one dtrain launch and dtrain logs print; the hostname a rank
// recorded ("vm" for the node launched as "localhost") gives way to it, and stays where the job
// names no node for that rank.
TEST(TimelineMerge, TheJobsNodeNameWinsOverTheHostnameATraceRecords) {
  ScratchDir dir;
  testing::WriteRankTrace(dir / "rank-0.json", 0, "vm", 0, 2);
  testing::WriteRankTrace(dir / "rank-1.json", 1, "vm", 0, 2);
  MergeResult result = MergeTimelines({dir / "rank-0.json", dir / "rank-1.json"}, dir / "m.json",
                                      {}, {{0, "localhost"}});
  EXPECT_EQ(CheckMergedTrace(dir / "m.json").process_names,
            (std::map<int, std::string>{{0, "rank 0 (localhost)"}, {1, "rank 1 (vm)"}}));
  ASSERT_EQ(result.ranks.size(), 2u);
  EXPECT_EQ(result.ranks[0].host, "localhost");
  EXPECT_EQ(result.ranks[1].host, "vm");
}

TEST(TimelineMerge, RefusesTextThatIsNotATrace) {
  ScratchDir dir;
  WriteFile(dir / "rank-0.json", "{\"traceEvents\": []}");
  try {
    MergeTimelines({dir / "rank-0.json"}, dir / "m.json", {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank-0.json: not a Chrome trace-event array"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "m.json"));
  WriteFile(dir / "rank-1.json", "[{\"ph\": \"B\"}, 17]");
  EXPECT_THROW(MergeTimelines({dir / "rank-1.json"}, dir / "m.json", {}), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "m.json.partial"));
}

TEST(TimelineMerge, RefusesToOverwriteAnInput) {
  ScratchDir dir;
  testing::WriteRankTrace(dir / "rank-0.json", 0, "h", 0, 1);
  std::string before = ReadFile(dir / "rank-0.json");
  try {
    MergeTimelines({dir / "rank-0.json"}, dir / "rank-0.json", {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitUsage);
  }
  EXPECT_EQ(ReadFile(dir / "rank-0.json"), before);
}

// A 60 MB rank file merged in a child process whose peak memory is measured.
TEST(TimelineMerge, StreamsInputsMuchLargerThanItsMemory) {
  ScratchDir dir;
  std::string path = dir / "rank-0.json";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(
        "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": "
        "{\"start_time_since_epoch_in_micros\": 1, \"rank\": 0}}",
        f);
    std::string pad(40, 'x');
    for (int i = 0; i < 450000; ++i) {
      std::fprintf(f,
                   ",\n{\"ph\": \"B\", \"name\": \"FORWARD\", \"ts\": %d, \"pid\": 1, "
                   "\"args\": {\"pad\": \"%s\"}},\n{\"ph\": \"E\", \"ts\": %d, \"pid\": 1}",
                   2 * i, pad.c_str(), 2 * i + 1);
    }
    std::fputs("]", f);
    std::fclose(f);
  }
  ASSERT_GT(std::filesystem::file_size(path), 60u << 20);
  struct rusage before {};
  ::getrusage(RUSAGE_CHILDREN, &before);
  int status = testing::RunInChild([&] {
    MergeResult r = MergeTimelines({path}, dir / "m.json", {});
    ::_exit(r.events == 900000 ? 0 : 3);
  });
  EXPECT_EQ(status, 0);
  struct rusage after {};
  ::getrusage(RUSAGE_CHILDREN, &after);
  // ru_maxrss is in KiB: the merge must stay far below the input's 60 MB.
  EXPECT_LT(after.ru_maxrss, 30 * 1024) << "peak RSS " << after.ru_maxrss << " KiB";
  EXPECT_GT(std::filesystem::file_size(dir / "m.json"), 60u << 20);
}

}  // namespace
}  // namespace dtrain
