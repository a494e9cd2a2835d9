// `dtrain timeline --summary`'s analyses of PyTorch profiler traces beyond the temporal breakdown,
// on the recorded H100 fixtures (tests/support/kineto_fixtures.h) against HolisticTraceAnalysis run
// in the test: why the GPU sat idle, how its work was launched and how far ahead (idle time
// breakdown, kernel launch stats, queue length), a rank whose GPU is slower at the same work, and
// this run against another (TraceDiff).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/error.h"
#include "launcher/timeline/gpu_speed_compare.h"
#include "launcher/timeline/timeline_report.h"
#include "tests/support/kineto_fixtures.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::Gunzip;
using test::Gzip;
using test::kRank0;
using test::kRank1;
using test::MakeCases;
using test::RequireFixtures;
using test::RunHtaScript;
using test::Summarize;
using test::WriteWithDriverLaunchesRenamed;
using testing::ScratchDir;
using testing::WriteFile;

// HTA's idle time breakdown and CUDA kernel launch stats (tests/kineto/hta_idle_launch.py) of each
// folder, at nanosecond precision: {folder: {rank: {"streams", "launches"}}}.
json HtaIdleAndLaunches(const std::vector<fs::path>& folders) {
  std::string args;
  for (const fs::path& folder : folders) args += " " + folder.string();
  return RunHtaScript("hta_idle_launch.py", args);
}

// One rank's idle causes and launches, dtrain's (--json) against HTA's. `all_counted`: the trace
// launches nothing by the driver's calls, which HTA 0.5 does not count.
void ExpectIdleAndLaunchesAgree(const json& ours, const json& hta, bool all_counted,
                                const std::string& what) {
  std::map<std::string, json> our_streams;
  for (const json& s : ours["idle_by_stream"])
    our_streams[std::to_string(s["stream"].get<int>())] = s;
  EXPECT_EQ(our_streams.size(), hta["streams"].size()) << what;
  for (const auto& [stream, causes] : hta["streams"].items()) {
    ASSERT_TRUE(our_streams.count(stream)) << what << ": stream " << stream;
    const json& s = our_streams[stream];
    for (const char* cause : {"host_wait", "kernel_wait", "other"}) {
      const double theirs = causes.value(std::string(cause) + "_us", 0.0) / 1000.0;
      EXPECT_NEAR(s[std::string(cause) + "_ms"].get<double>(), theirs, 0.002)
          << what << ": stream " << stream << " " << cause;
    }
  }
  const json& l = ours["launches"];
  const json& h = hta["launches"];
  std::map<std::string, json> our_queues;
  int queued = 0, hta_queued = 0;
  for (const json& q : ours["launch_queue"]) {
    our_queues[std::to_string(q["stream"].get<int>())] = q;
    queued += q["launches"].get<int>();
  }
  for (const auto& [stream, q] : hta["queues"].items()) hta_queued += q["launches"].get<int>();
  if (!all_counted) {
    EXPECT_EQ(l["launches"].get<int>() - l["driver_launches"].get<int>(), h["launches"].get<int>())
        << what;
    // HTA's queue counts the runtime's launches and cuLaunchKernel, not cuLaunchKernelEx.
    EXPECT_EQ(queued - l["driver_launches"].get<int>(), hta_queued) << what;
    return;
  }
  EXPECT_EQ(our_queues.size(), hta["queues"].size()) << what;
  for (const auto& [stream, q] : hta["queues"].items()) {
    ASSERT_TRUE(our_queues.count(stream)) << what << ": queue of stream " << stream;
    const json& o = our_queues[stream];
    EXPECT_EQ(o["launches"], q["launches"]) << what << ": stream " << stream;
    EXPECT_NEAR(o["mean"].get<double>(), q["mean"].get<double>(), 0.001)
        << what << ": stream " << stream;
    EXPECT_EQ(o["max"], q["max"]) << what << ": stream " << stream;
    EXPECT_NEAR(o["full_ms"].get<double>(), q["full_us"].get<double>() / 1000.0, 0.002)
        << what << ": stream " << stream;
  }
  EXPECT_EQ(l["driver_launches"], 0) << what;
  EXPECT_EQ(l["launches"], h["launches"]) << what;
  EXPECT_NEAR(l["delay_median_us"].get<double>(), h["delay_median_us"].get<double>(), 0.002)
      << what;
  EXPECT_NEAR(l["delay_max_us"].get<double>(), h["delay_max_us"].get<double>(), 0.002) << what;
  for (const char* count : {"delayed", "slow_calls", "shorter_than_call"}) {
    EXPECT_EQ(l[count], h[count]) << what << ": " << count;
  }
}

// Why the GPU sat idle (host wait, kernel wait, other, per stream), how its work was launched
// (launch delays, slow launch calls, kernels shorter than their launch) and how far ahead (the
// launch queue of each stream, and its time at CUDA's 1,024), against HTA run in the test: on
// the two H100 ranks as recorded, where HTA leaves out the 161 launches by cuLaunchKernelEx; on
// the same traces with those launches renamed to a runtime call HTA counts, where every figure
// must match; and on each isolated case, cut from the renamed rank 0 so that there too every
// figure must match.
TEST(KinetoTimeline, IdleCausesAndLaunchesAgreeWithHolisticTraceAnalysis) {
  RequireFixtures();
  ScratchDir dir;
  const fs::path recorded = dir / "recorded", renamed = dir / "renamed";
  fs::create_directories(recorded);
  fs::create_directories(renamed);
  for (const auto& [rank, path] : {std::pair{0, kRank0}, std::pair{1, kRank1}}) {
    const std::string file = "rank" + std::to_string(rank) + ".json.gz";
    fs::copy_file(path, recorded / file);
    EXPECT_GT(WriteWithDriverLaunchesRenamed(path, (renamed / file).string()), 50u);
  }
  std::vector<std::string> cases = MakeCases(dir / "cases", (renamed / "rank0.json.gz").string());
  ASSERT_EQ(cases.size(), 11u);
  std::vector<fs::path> folders;
  for (const std::string& name : cases) folders.push_back(fs::path(dir / "cases") / name);
  folders.push_back(recorded);
  folders.push_back(renamed);
  const json hta = HtaIdleAndLaunches(folders);
  ASSERT_EQ(hta.size(), folders.size());

  int driver_launches = 0;
  for (const fs::path& folder : folders) {
    std::vector<std::string> traces;
    for (const char* file : {"rank0.json.gz", "rank1.json.gz"}) {
      if (fs::exists(folder / file)) traces.push_back((folder / file).string());
    }
    const json ours = TimelineReportJson(Summarize(
        traces, (folder.parent_path() / (folder.filename().string() + ".json")).string()));
    const json& theirs = hta[folder.string()];
    ASSERT_EQ(ours["ranks"].size(), theirs.size()) << folder;
    for (const json& rank : ours["ranks"]) {
      const std::string r = std::to_string(rank["rank"].get<int>());
      const bool all_counted = rank["launches"]["driver_launches"] == 0;
      if (folder == recorded) driver_launches += rank["launches"]["driver_launches"].get<int>();
      if (folder != recorded) {
        EXPECT_TRUE(all_counted) << folder << ": every figure compared";
      }
      ExpectIdleAndLaunchesAgree(rank, theirs[r], all_counted,
                                 folder.filename().string() + " rank " + r);
      if (folder.filename() == "full_launch_queue") {  // the one case whose queue fills up
        const json& queue = rank["launch_queue"].back();
        EXPECT_EQ(queue["stream"], 200) << queue.dump();
        EXPECT_EQ(queue["max"], 1100) << queue.dump();
        EXPECT_NEAR(queue["full_ms"].get<double>(), 0.505, 0.001) << queue.dump();
      }
    }
  }
  EXPECT_EQ(driver_launches, 161);  // the recorded traces do launch by the driver
}

// The recorded rank `rank` with every GPU activity whose name starts with `prefix` made `factor`
// times as long, written to `out`.
void StretchActivities(const std::string& trace, const std::string& prefix, double factor,
                       const fs::path& out) {
  json doc = json::parse(Gunzip(trace));
  int stretched = 0;
  for (json& e : doc["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if ((cat == "kernel" || cat == "gpu_memcpy") && e.value("name", "").rfind(prefix, 0) == 0) {
      e["dur"] = e["dur"].get<double>() * factor;
      ++stretched;
    }
  }
  EXPECT_GT(stretched, 10) << prefix;
  Gzip(out.string(), doc.dump());
}

// A GPU slower than its peers at the same work: on the recorded job (two ranks on one H100)
// neither stands out; with one rank's compute kernels 30% longer, or its copies to the GPU 2.5
// times as long (a PCIe link at reduced width), that rank is named with its ratio, and the other
// stays at the median.
TEST(KinetoTimeline, ARankWhoseGpuIsSlowerAtTheSameWorkIsNamed) {
  RequireFixtures();
  ScratchDir dir;
  auto summary = [&](const std::vector<std::string>& traces, const std::string& name) {
    TimelineReport report = Summarize(traces, dir / (name + ".json"));
    return std::pair{TimelineReportJson(report), FormatTimelineReport(report)};
  };
  const auto [recorded, recorded_text] = summary({kRank0, kRank1}, "recorded");
  for (int r = 0; r < 2; ++r) {
    const json& speed = recorded["ranks"][r]["speed"];
    EXPECT_LT(speed["compute_ratio"].get<double>(), kSlowComputeRatio) << speed.dump();
    EXPECT_GT(speed["compute_kernels"].get<int>(), 20) << speed.dump();
    EXPECT_GT(speed["to_gpu_gbps"].get<double>(), 1.0) << speed.dump();
  }
  EXPECT_NE(recorded_text.find("GPU speed per rank"), std::string::npos) << recorded_text;
  EXPECT_EQ(recorded_text.find("slower than the median rank"), std::string::npos) << recorded_text;

  // Compute kernels (nvjet GEMMs, at::native kernels) 30% longer on rank 1.
  StretchActivities(kRank1, "nvjet", 1.3, dir / "nvjet.json.gz");
  StretchActivities(dir / "nvjet.json.gz", "void at::native", 1.3, dir / "slow1.json.gz");
  const auto [slow, slow_text] = summary({kRank0, dir / "slow1.json.gz"}, "slow");
  EXPECT_NEAR(slow["ranks"][0]["speed"]["compute_ratio"].get<double>(), 1.0, 0.02);
  EXPECT_NEAR(slow["ranks"][1]["speed"]["compute_ratio"].get<double>(), 1.3, 0.03);
  EXPECT_NE(slow_text.find("Rank 1 runs the same compute kernels 3"), std::string::npos)
      << slow_text;

  // Copies to the GPU 2.5 times as long on rank 0: 2.5 times the time, 1/2.5 of the rate.
  StretchActivities(kRank0, "Memcpy HtoD", 2.5, dir / "link0.json.gz");
  const auto [link, link_text] = summary({dir / "link0.json.gz", kRank1}, "link");
  const json& link0 = link["ranks"][0]["speed"];
  EXPECT_NEAR(link0["to_gpu_ratio"].get<double>(),
              2.5 * recorded["ranks"][0]["speed"]["to_gpu_ratio"].get<double>(), 0.05);
  EXPECT_NEAR(link0["to_gpu_gbps"].get<double>(),
              recorded["ranks"][0]["speed"]["to_gpu_gbps"].get<double>() / 2.5, 0.05);
  EXPECT_NEAR(link0["compute_ratio"].get<double>(),
              recorded["ranks"][0]["speed"]["compute_ratio"].get<double>(), 1e-6);
  EXPECT_NE(link_text.find("Rank 0 copies to its GPU at "), std::string::npos) << link_text;
  EXPECT_EQ(link_text.find("Rank 1 copies"), std::string::npos) << link_text;
}

// --against, operator by operator and kernel by kernel, against HTA's TraceDiff run in the test
// on the same two traces (the recorded rank 0 as the run before, rank 1 as the run here, all their
// profiler steps): every name HTA lists, GPU-side and CPU operators, with the same counts and
// times on each side, and no other name. The run before named as a job gives the same; a run
// without PyTorch traces is refused, naming it.
TEST(KinetoTimeline, AgainstAnotherRunAgreesWithHolisticTraceAnalysisTraceDiff) {
  RequireFixtures();
  ScratchDir dir;
  fs::create_directories(dir / "before");
  fs::create_directories(dir / "after");
  fs::copy_file(kRank0, dir / "before/rank0.json.gz");
  fs::copy_file(kRank1, dir / "after/rank1.json.gz");
  const json hta = RunHtaScript("hta_trace_diff.py", (dir / "before") + " " + (dir / "after"));
  ASSERT_FALSE(hta.empty());

  TimelineRequest request;
  request.inputs = {kRank1};
  request.output = dir / "merged.json";
  request.summary = true;
  request.against = {kRank0};
  const json diff = TimelineReportJson(MakeTimeline(request))["against"];
  ASSERT_TRUE(diff.is_object());
  EXPECT_EQ(diff["steps_before"], hta["iterations"][0]);
  EXPECT_EQ(diff["steps_after"], hta["iterations"][1]);
  EXPECT_EQ(diff["rank_before"], 0);
  EXPECT_EQ(diff["rank_after"], 1);
  std::map<std::pair<std::string, std::string>, json> ours;
  for (const json& c : diff["changes"]) {
    ours[{c["device"] == "gpu" ? "gpu" : "cpu_op", c["name"]}] = c;
  }
  size_t names = 0;
  for (const char* device : {"gpu", "cpu_op"}) {
    for (const auto& [name, v] : hta[device].items()) {
      ++names;
      auto it = ours.find({device, name});
      ASSERT_NE(it, ours.end()) << device << " " << name;
      const json& c = it->second;
      EXPECT_EQ(c["before_count"], v[0]) << name;
      EXPECT_EQ(c["after_count"], v[1]) << name;
      EXPECT_NEAR(c["before_total_us"].get<double>(), v[2].get<double>(), 0.002) << name;
      EXPECT_NEAR(c["after_total_us"].get<double>(), v[3].get<double>(), 0.002) << name;
    }
  }
  EXPECT_EQ(ours.size(), names);
  EXPECT_GT(names, 80u);
  EXPECT_EQ(diff["added"], 1);  // rank 1's GPU sleep
  // The same, the run before named as a job of the log folder.
  fs::create_directories(dir / "logs/before-job/timeline");
  fs::copy_file(kRank0, dir / "logs/before-job/timeline/rank0.json.gz");
  request.log_dir = dir / "logs";
  request.against = {"before-job"};
  const json by_job = TimelineReportJson(MakeTimeline(request))["against"];
  EXPECT_EQ(by_job["against"], "job before-job");
  EXPECT_EQ(by_job["changes"], diff["changes"]);
  // A run without PyTorch traces.
  WriteFile(dir / "spans.json",
            "[{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": "
            "\"x\", \"rank\": 0}},\n{\"ph\": \"X\", \"name\": \"FORWARD\", \"ts\": 1, "
            "\"dur\": 5, \"pid\": 0, \"tid\": 1}]\n");
  request.against = {dir / "spans.json"};
  try {
    MakeTimeline(request);
    FAIL() << "a run without PyTorch traces was compared";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("spans.json: it has no PyTorch profiler trace"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace dtrain
