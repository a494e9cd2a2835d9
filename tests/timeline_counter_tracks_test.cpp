// `dtrain timeline --counters`: each stream's launch queue and the bandwidth of copies in flight,
// as counter tracks in the merged trace; and the summary's description of that bandwidth. Against
// HolisticTraceAnalysis' time series behind its trace with counters and its memory bandwidth
// summary (tests/kineto/hta_counters.py, HTA 0.5.0 run in the test), point by point and figure by
// figure, on the recorded H100 ranks (driver launches renamed so that HTA counts them too) and on
// every isolated case of tests/kineto/hta_cases.py; and by hand on small traces.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/counter_tracks.h"
#include "launcher/timeline/memory_bandwidth.h"
#include "launcher/timeline/timeline_report.h"
#include "tests/support/kineto_fixtures.h"
#include "tests/support/test_paths.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::kRank0;
using test::kRank1;
using test::RenamedFixtureAndCases;
using test::RequireFixtures;
using test::RunHtaScript;
using test::RunShell;
using testing::ScratchDir;

// Two launches on stream 7 before the first kernel starts; a copy overlapping a second copy of
// the same kind, and one of no time.
TEST(CounterTracks, QueueAndBandwidthByHand) {
  CounterTracksBuilder b;
  auto call = [&](double ts, int64_t corr) {
    b.Add(KinetoEvent{0, "cuda_runtime", "cudaLaunchKernel", ts, 2, -1, corr, -1});
  };
  auto gpu = [&](std::string_view cat, std::string_view name, double ts, double dur, int64_t corr,
                 double bw = -1) {
    KinetoEvent e{0, cat, name, ts, dur, 7, corr, -1};
    e.memory_bw_gbps = bw;
    b.Add(e);
  };
  call(10, 1);
  call(12, 2);
  gpu("kernel", "gemm", 20, 5, 1);
  gpu("kernel", "gemm", 25, 5, 2);
  gpu("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 40, 10, 3, 20.0);
  gpu("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 45, 10, 4, 5.0);
  gpu("gpu_memset", "Memset (Device)", 60, 0, 5, 1.0);
  gpu("kernel", "not launched here", 70, 1, 99);  // no launch call: not in the queue
  const std::map<int, RankCounters> series = b.Series();
  ASSERT_EQ(series.size(), 1u);
  const RankCounters& c = series.at(0);
  auto points = [&](const std::string& name) {
    std::vector<std::pair<double, double>> out;
    for (const CounterPoint& p : c.at(name)) out.push_back({p.ts_us, p.value});
    return out;
  };
  using P = std::vector<std::pair<double, double>>;
  EXPECT_EQ(points("Queue length (stream 7)"), (P{{10, 1}, {12, 2}, {20, 1}, {25, 0}}));
  EXPECT_EQ(points("Memcpy DtoH bandwidth"), (P{{40, 20}, {45, 25}, {50, 5}, {55, 0}}));
  EXPECT_EQ(points("Memset bandwidth"), (P{{60, 1}, {61, 0}}));  // no time lasts 1 µs, as HTA
  EXPECT_EQ(c.size(), 3u);
}

// Two overlapping copies of a kind, one of no time, one without a bandwidth, two copies that end
// and start at one time, and a kind with one point.
TEST(MemoryBandwidthSummary, DescribesTheSeriesAsPandasDoes) {
  const std::vector<MemoryCopy> copies = {
      {"Memcpy DtoD", 0, 10, 100}, {"Memcpy DtoD", 5, 15, 50},   // 100, 150, 50, 0
      {"Memcpy DtoD", 20, 20, 30},                               // no time: 1 µs; 30, 0
      {"Memcpy DtoD", 30, 40, 0},                                // no bandwidth: no point
      {"Memcpy DtoD", 50, 60, 10}, {"Memcpy DtoD", 60, 70, 20},  // 10, then 20 at 60 (one point)
      {"Memset", 0, 4, 2},
  };
  const std::vector<MemoryBandwidth> got = SummarizeMemoryBandwidth(copies);
  ASSERT_EQ(got.size(), 2u);
  const MemoryBandwidth& d = got[0];
  EXPECT_EQ(d.kind, "Memcpy DtoD");
  // Points above 0: 100, 150, 50, 30, 10, 20.
  EXPECT_EQ(d.points, 6);
  EXPECT_DOUBLE_EQ(d.mean, 60);
  EXPECT_NEAR(d.std, std::sqrt(14800.0 / 5),
              1e-9);  // squared deviations 1600+8100+100+900+2500+1600
  EXPECT_EQ(d.min, 10);
  EXPECT_DOUBLE_EQ(d.p25, 22.5);  // sorted 10 20 30 50 100 150: position 1.25
  EXPECT_DOUBLE_EQ(d.p50, 40);
  EXPECT_DOUBLE_EQ(d.p75, 87.5);
  EXPECT_EQ(d.max, 150);
  EXPECT_EQ(got[1].kind, "Memset");
  EXPECT_EQ(got[1].points, 1);
  EXPECT_EQ(got[1].std, -1);  // pandas: NaN; --json: null
  EXPECT_EQ(got[1].p25, 2);
  EXPECT_TRUE(SummarizeMemoryBandwidth({{"Memset", 0, 1, 0}}).empty());
  const std::string table = FormatMemoryBandwidth({{3, got}});
  EXPECT_NE(table.find("    3  Memcpy DtoD         6        60"), std::string::npos) << table;
  EXPECT_EQ(MemoryBandwidthJson(got)[1]["std"], nullptr);
  EXPECT_EQ(FormatMemoryBandwidth({{0, {}}}), "");
}

// A rank's counters in a merged trace: name -> [t, value], t in µs after its first step.
std::map<std::string, std::vector<std::pair<double, double>>> MergedCounters(const fs::path& merged,
                                                                             int rank) {
  std::ifstream in(merged);
  const json events = json::parse(in);
  double start = 1e300;
  std::map<std::string, std::vector<std::pair<double, double>>> out;
  for (const json& e : events) {
    if (e.value("pid", -1) != rank) continue;
    const std::string name = e.value("name", "");
    if (e.value("cat", "") == "user_annotation" && name.rfind("ProfilerStep", 0) == 0) {
      start = std::min(start, e["ts"].get<double>());
    }
    if (e["ph"] == "C")
      out[name].push_back({e["ts"].get<double>(), e["args"].begin()->get<double>()});
  }
  for (auto& [name, points] : out) {
    for (auto& p : points) p.first -= start;
  }
  return out;
}

// HTA's memory bandwidth summary of one rank (hta_counters.py's "bandwidth_summary") against the
// summary's; returns the kinds compared.
int CompareBandwidthSummary(const json& theirs, const std::vector<MemoryBandwidth>& ours,
                            const std::string& what) {
  EXPECT_EQ(ours.size(), theirs.size()) << what;
  int compared = 0;
  for (const MemoryBandwidth& b : ours) {
    const std::string where = what + " " + b.kind;
    if (!theirs.contains(b.kind)) {
      ADD_FAILURE() << where << ": HTA has none";
      continue;
    }
    const json& h = theirs[b.kind];
    EXPECT_EQ(b.points, h["count"].get<double>()) << where;
    auto near = [&](double mine, const json& hta, const char* stat) {
      const double v = hta.get<double>();
      EXPECT_NEAR(mine, v, 1e-6 * std::max(1.0, std::fabs(v))) << where << " " << stat;
    };
    near(b.mean, h["mean"], "mean");
    if (h["std"].is_null()) {
      EXPECT_EQ(b.std, -1) << where;
    } else {
      near(b.std, h["std"], "std");
    }
    near(b.min, h["min"], "min");
    near(b.p25, h["25%"], "25%");
    near(b.p50, h["50%"], "50%");
    near(b.p75, h["75%"], "75%");
    near(b.max, h["max"], "max");
    ++compared;
  }
  return compared;
}

TEST(CounterTracks, AgreeWithHolisticTraceAnalysisPointByPoint) {
  RequireFixtures();
  ScratchDir scratch;
  const fs::path dir = scratch.path();
  const std::vector<fs::path> folders = RenamedFixtureAndCases(dir);
  ASSERT_EQ(folders.size(), 1 + 11u);
  // HTA leaves out of what it reads the CPU events from the last step on and the GPU activity
  // they launched (or that nothing in the trace launched); dtrain reads the traces as HTA read them
  // (hta_counters.py --as-read), so that every point must match.
  const fs::path as_read = dir / "as-read";
  std::string args = "--as-read " + as_read.string();
  for (const fs::path& folder : folders) args += " " + folder.string();
  const json hta = RunHtaScript("hta_counters.py", args);
  ASSERT_FALSE(hta.empty());
  int queue_points = 0, bandwidth_points = 0, summarized = 0;
  for (size_t n = 0; n < folders.size(); ++n) {
    // The summary cuts the trace at the last step itself: it reads the folder as written.
    TimelineRequest summary_request;
    for (const auto& entry : fs::directory_iterator(folders[n])) {
      summary_request.inputs.push_back(entry.path().string());
    }
    std::sort(summary_request.inputs.begin(), summary_request.inputs.end());
    summary_request.output = folders[n].string() + "-summary.json";
    summary_request.summary = true;
    const TimelineReport summary = MakeTimeline(summary_request);

    const fs::path read = as_read / std::to_string(n);
    TimelineRequest request;
    for (const char* file : {"rank0.json.gz", "rank1.json.gz"}) {
      if (fs::exists(read / file)) request.inputs.push_back((read / file).string());
    }
    ASSERT_FALSE(request.inputs.empty()) << read;
    request.output = read.string() + "-merged.json";
    request.counters = true;
    MakeTimeline(request);
    for (const auto& [rank_text, theirs] : hta.at(folders[n].string()).items()) {
      const int rank = std::stoi(rank_text);
      auto ours = MergedCounters(request.output, rank);
      auto compare = [&](const std::string& name, const json& hta_points, bool queue) {
        const std::string what = folders[n].filename().string() + " rank " + rank_text + " " + name;
        const std::vector<std::pair<double, double>> mine = ours[name];
        ours.erase(name);
        ASSERT_EQ(mine.size(), hta_points.size()) << what;
        for (size_t i = 0; i < mine.size(); ++i) {
          const double t = hta_points[i][0].get<double>(), v = hta_points[i][1].get<double>();
          EXPECT_NEAR(mine[i].first, t, 0.003) << what << " point " << i;
          EXPECT_NEAR(mine[i].second, v, queue ? 0 : 1e-6 * std::max(1.0, std::fabs(v)))
              << what << " point " << i << " at " << t;
          (queue ? queue_points : bandwidth_points) += 1;
        }
      };
      for (const auto& [stream, points] : theirs["queue"].items()) {
        compare("Queue length (stream " + stream + ")", points, true);
      }
      for (const auto& [kind, points] : theirs["bandwidth"].items()) {
        compare(kind + " bandwidth", points, false);
      }
      for (const auto& [name, points] : ours) ADD_FAILURE() << "HTA has no " << name;
      const auto bandwidth = summary.gpu.memory_bandwidth.find(rank);
      summarized += CompareBandwidthSummary(theirs["bandwidth_summary"],
                                            bandwidth == summary.gpu.memory_bandwidth.end()
                                                ? std::vector<MemoryBandwidth>{}
                                                : bandwidth->second,
                                            folders[n].filename().string() + " rank " + rank_text);
    }
  }
  EXPECT_GT(queue_points, 10000);
  EXPECT_GT(bandwidth_points, 100);
  EXPECT_GE(summarized, 4 * 12);  // every kind of every rank of every folder
  std::cout << queue_points << " queue and " << bandwidth_points << " bandwidth points as HTA's; "
            << summarized << " bandwidth summaries\n";
}

TEST(CounterTracks, CommandLine) {
  RequireFixtures();
  ScratchDir dir;
  const std::string merged = dir / "m.json";
  int status = 0;
  const std::string out =
      RunShell(std::string(DTRAIN_BINARY_DIR) + "/dtrain timeline --counters -o " + merged + " " +
                   kRank0 + " " + kRank1,
               &status);
  ASSERT_EQ(status, 0) << out;
  const auto rank1 = MergedCounters(merged, 1);
  ASSERT_TRUE(rank1.count("Queue length (stream 7)"));
  EXPECT_TRUE(rank1.count("Memcpy HtoD bandwidth"));
  // Without --counters the trace has none.
  RunShell(std::string(DTRAIN_BINARY_DIR) + "/dtrain timeline -o " + merged + " " + kRank0,
           &status);
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(MergedCounters(merged, 0).empty());
}

// The counters and the critical path read PyTorch profiler traces: asked for on dtrain-clip's
// traces alone, each says so (and the merge goes on).
TEST(CounterTracks, OnSpanTracesAloneTheyAndThePathSaySo) {
  ScratchDir dir;
  testing::WriteRankTrace(dir / "rank-0.json", 0, "node-a", 0, 2);
  TimelineRequest request;
  request.inputs = {dir / "rank-0.json"};
  request.output = dir / "merged.json";
  request.summary = true;
  request.counters = true;
  request.critical_path = "slowest";
  const TimelineReport report = MakeTimeline(request);
  int said = 0;
  for (const std::string& w : report.merge.warnings) {
    said += w.find("none of the traces is a PyTorch profiler trace") != std::string::npos;
  }
  EXPECT_EQ(said, 2);
  EXPECT_TRUE(MergedCounters(dir / "merged.json", 0).empty());
  request.inputs = {kRank0};
  for (const std::string& w : MakeTimeline(request).merge.warnings) {
    EXPECT_EQ(w.find("none of the traces"), std::string::npos) << w;
  }
}

}  // namespace
}  // namespace dtrain
