// `dtrain timeline --summary --critical-path`: each rank's critical path through one step. Small
// traces whose path is worked out by hand (launch delays, a busy stream's gaps, a blocking wait,
// synchronisation records, which step), then every step of the recorded H100 fixtures and of the
// isolated cases of tests/kineto/hta_cases.py against HolisticTraceAnalysis' critical path
// analysis run in the test (tests/kineto/hta_critical_path.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/critical_path.h"
#include "launcher/timeline/critical_path_overlay.h"
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

constexpr int kCpuThread = 1;
constexpr int kStreamTrack = 2;
constexpr const char* kNccl =
    "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)";

// A rank's trace as the merge hands it to the builder.
class Trace {
 public:
  Trace& Cpu(std::string_view cat, std::string_view name, double ts, double dur,
             int64_t correlation = -1) {
    events_.push_back(KinetoEvent{0, cat, name, ts, dur, -1, correlation, -1, kCpuThread});
    return *this;
  }
  Trace& Gpu(std::string_view name, double ts, double dur, int64_t correlation,
             int64_t stream = 7) {
    events_.push_back(
        KinetoEvent{0, "kernel", name, ts, dur, stream, correlation, -1, kStreamTrack});
    return *this;
  }
  // A synchronisation record; `record`: the correlation of the cudaEventRecord it waited on, made
  // on `recorded_on`.
  Trace& Sync(std::string_view name, double ts, double dur, int64_t correlation, int64_t stream = 7,
              int64_t record = -1, int64_t recorded_on = -1) {
    events_.push_back(KinetoEvent{0, "cuda_sync", name, ts, dur, stream, correlation, -1,
                                  kStreamTrack, recorded_on, record});
    return *this;
  }
  RankCriticalPath Path(const std::string& which = "slowest") const {
    CriticalPathBuilder builder("", which);
    for (const KinetoEvent& e : events_) builder.Add(e);
    std::vector<RankCriticalPath> paths = builder.Finish();
    EXPECT_EQ(paths.size(), 1u);
    return paths.empty() ? RankCriticalPath{} : paths[0];
  }

 private:
  std::vector<KinetoEvent> events_;
};

double Bound(const RankCriticalPath& p, PathBound bound) {
  return p.bound_us[static_cast<size_t>(bound)];
}

// The CPU launches a kernel late in an operator and the GPU has nothing else: the path runs
// through the CPU up to the launch, the launch's delay, then the kernel.
TEST(CriticalPath, ALateLaunchPutsTheCpuAndTheLaunchOnThePath) {
  Trace t;
  t.Cpu("user_annotation", "ProfilerStep#1", 0, 1000)
      .Cpu("cpu_op", "aten::mm", 0, 100)
      .Cpu("cuda_runtime", "cudaLaunchKernel", 90, 5, 1)
      .Gpu("gemm", 300, 100, 1);
  const RankCriticalPath p = t.Path();
  EXPECT_EQ(p.step, "ProfilerStep#1");
  EXPECT_DOUBLE_EQ(p.step_us, 1000);
  EXPECT_DOUBLE_EQ(p.path_us, 400);
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kCpu), 90);
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kLaunchDelay), 210);
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kGpuCompute), 100);
  ASSERT_EQ(p.stretches.size(), 3u);
  EXPECT_EQ(p.stretches[0].name, "gemm");  // the launch's delay, named after its kernel
  EXPECT_EQ(p.stretches[0].bound, PathBound::kLaunchDelay);
  EXPECT_EQ(p.stretches[1].name, "gemm");
  EXPECT_EQ(p.stretches[2].name, "aten::mm");
  EXPECT_FALSE(p.sync_events);
}

TEST(CriticalPath, NcclKernelsAreCommunication) {
  Trace t;
  t.Cpu("user_annotation", "ProfilerStep#1", 0, 1000)
      .Cpu("cpu_op", "c10d::allreduce_", 0, 100)
      .Cpu("cuda_runtime", "cudaLaunchKernel", 90, 5, 1)
      .Gpu(kNccl, 300, 100, 1, 20);
  const RankCriticalPath p = t.Path();
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kGpuCommunication), 100);
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kGpuCompute), 0);
}

// Two launches queued while the stream is busy: neither is a launch delay (the queue was not
// empty), the second kernel waits on the first, and the idle time between them is a gap.
TEST(CriticalPath, KernelsQueuedBehindEachOtherMakeGapsNotLaunchDelays) {
  Trace t;
  t.Cpu("user_annotation", "ProfilerStep#1", 0, 1000)
      .Cpu("cpu_op", "aten::add", 0, 20)
      .Cpu("cuda_runtime", "cudaLaunchKernel", 10, 2, 1)
      .Cpu("cuda_runtime", "cudaLaunchKernel", 14, 2, 2)
      .Gpu("first", 20, 100, 1)
      .Gpu("second", 150, 100, 2);
  const RankCriticalPath p = t.Path();
  EXPECT_DOUBLE_EQ(p.path_us, 230);
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kGpuCompute), 200);
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kKernelGap), 30);
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kLaunchDelay), 0);
  EXPECT_DOUBLE_EQ(Bound(p, PathBound::kCpu), 0);
  bool gap_after_first = false;
  for (const PathStretch& s : p.stretches) {
    gap_after_first |= s.bound == PathBound::kKernelGap && s.name == "first" && s.us == 30;
  }
  EXPECT_TRUE(gap_after_first);
}

// The CPU waits in cudaStreamSynchronize for a long kernel, then runs an operator. The wait weighs
// nothing; without a synchronisation record the path ends with the kernel, with one ("Stream
// Sync") it goes on from the kernel's end to the operator after the wait.
TEST(CriticalPath, AWaitWeighsNothingAndASyncRecordLeadsBackToTheCpu) {
  Trace t;
  t.Cpu("user_annotation", "ProfilerStep#1", 0, 1000)
      .Cpu("cpu_op", "aten::mm", 0, 10)
      .Cpu("cuda_runtime", "cudaLaunchKernel", 1, 1, 1)
      .Gpu("gemm", 5, 500, 1)
      .Cpu("cuda_runtime", "cudaStreamSynchronize", 11, 495, 2)
      .Cpu("cpu_op", "aten::item", 510, 90);
  const RankCriticalPath without = t.Path();
  EXPECT_DOUBLE_EQ(without.path_us, 505);
  EXPECT_DOUBLE_EQ(Bound(without, PathBound::kCpu), 1);
  EXPECT_DOUBLE_EQ(Bound(without, PathBound::kLaunchDelay), 4);
  EXPECT_DOUBLE_EQ(Bound(without, PathBound::kGpuCompute), 500);

  t.Sync("Stream Sync", 11, 495, 2);
  const RankCriticalPath with = t.Path();
  EXPECT_TRUE(with.sync_events);
  EXPECT_DOUBLE_EQ(with.path_us, 595);
  EXPECT_DOUBLE_EQ(Bound(with, PathBound::kCpu), 91);
  EXPECT_DOUBLE_EQ(Bound(with, PathBound::kGpuCompute), 500);
}

// An operator launches "first" (20-320 on stream 7) and records CUDA event 10 after it.
Trace KernelThenEventRecord() {
  Trace t;
  t.Cpu("user_annotation", "ProfilerStep#1", 0, 1000)
      .Cpu("cpu_op", "aten::add", 0, 100)
      .Cpu("cuda_runtime", "cudaLaunchKernel", 10, 2, 1)
      .Gpu("first", 20, 300, 1)
      .Cpu("cuda_runtime", "cudaEventRecord", 13, 1, 10);
  return t;
}

// A kernel on stream 20 waits (cudaStreamWaitEvent) for an event recorded after a kernel on
// stream 7: with the "Stream Wait Event" record the path runs through both kernels, not through the
// second one's launch.
TEST(CriticalPath, AStreamWaitingForAnotherJoinsTheirKernels) {
  Trace t = KernelThenEventRecord();
  t.Cpu("cuda_runtime", "cudaStreamWaitEvent", 15, 1, 11)
      .Cpu("cuda_runtime", "cudaLaunchKernel", 17, 2, 2)
      .Gpu("second", 330, 100, 2, 20);
  const RankCriticalPath without = t.Path();
  EXPECT_DOUBLE_EQ(without.path_us, 430);
  EXPECT_DOUBLE_EQ(Bound(without, PathBound::kCpu), 17);
  EXPECT_DOUBLE_EQ(Bound(without, PathBound::kLaunchDelay), 313);
  EXPECT_DOUBLE_EQ(Bound(without, PathBound::kGpuCompute), 100);

  t.Sync("Stream Wait Event", 16, 0, 11, 20, 10, 7);
  const RankCriticalPath with = t.Path();
  EXPECT_DOUBLE_EQ(with.path_us, 420);
  EXPECT_DOUBLE_EQ(Bound(with, PathBound::kCpu), 10);
  EXPECT_DOUBLE_EQ(Bound(with, PathBound::kLaunchDelay), 10);
  EXPECT_DOUBLE_EQ(Bound(with, PathBound::kGpuCompute), 400);
}

// cudaEventSynchronize on an event recorded after a kernel: the "Event Sync" record leads from the
// kernel's end to the operator after the wait.
TEST(CriticalPath, AnEventSyncLeadsFromTheKernelToTheCpu) {
  Trace t = KernelThenEventRecord();
  t.Cpu("cuda_runtime", "cudaEventSynchronize", 101, 229, 12).Cpu("cpu_op", "aten::item", 335, 65);
  EXPECT_DOUBLE_EQ(t.Path().path_us, 320);
  t.Sync("Event Sync", 101, 229, 12, -1, 10, 7);
  const RankCriticalPath with = t.Path();
  EXPECT_DOUBLE_EQ(with.path_us, 385);
  EXPECT_DOUBLE_EQ(Bound(with, PathBound::kCpu), 75);
  EXPECT_DOUBLE_EQ(Bound(with, PathBound::kLaunchDelay), 10);
  EXPECT_DOUBLE_EQ(Bound(with, PathBound::kGpuCompute), 300);
}

TEST(CriticalPath, WhichStep) {
  Trace t;
  t.Cpu("user_annotation", "ProfilerStep#1", 0, 100)
      .Cpu("cpu_op", "short", 0, 80)
      .Cpu("user_annotation", "ProfilerStep#2", 200, 300)
      .Cpu("cpu_op", "long", 200, 250)
      .Cpu("user_annotation", "ProfilerStep#3", 600, 50)
      .Cpu("cpu_op", "shortest", 600, 40);
  const RankCriticalPath slowest = t.Path("slowest");
  EXPECT_EQ(slowest.step, "ProfilerStep#2");
  EXPECT_EQ(slowest.step_index, 1);
  EXPECT_EQ(slowest.steps, 3);
  EXPECT_DOUBLE_EQ(slowest.path_us, 250);
  EXPECT_EQ(t.Path("0").step, "ProfilerStep#1");
  EXPECT_DOUBLE_EQ(t.Path("0").path_us, 80);
  EXPECT_EQ(t.Path("ProfilerStep#3").step_index, 2);
  EXPECT_DOUBLE_EQ(t.Path("ProfilerStep#3").path_us, 40);
  EXPECT_EQ(t.Path("3").note, "step 3 asked for; the trace has 3 (0 to 2)");
  EXPECT_EQ(t.Path("ProfilerStep#9").note,
            "no step named ProfilerStep#9 in the trace (ProfilerStep#1 to ProfilerStep#3)");
  Trace none;
  none.Cpu("cpu_op", "aten::mm", 0, 10);
  EXPECT_EQ(none.Path().note, "no ProfilerStep#N step in the trace");
}

// The summary's critical paths of `traces` for `which`, as --summary --json prints them.
json Paths(const std::vector<std::string>& traces, const fs::path& output,
           const std::string& which) {
  TimelineRequest request;
  request.inputs = traces;
  request.output = output.string();
  request.summary = true;
  request.critical_path = which;
  const json doc = TimelineReportJson(MakeTimeline(request));
  EXPECT_TRUE(doc.contains("critical_path"));
  return doc.value("critical_path", json::array());
}

// The arrows of `rank`'s path in a merged trace: [cat, from, to] in µs after the step's start.
json MergedFlows(const fs::path& merged, int rank, const std::string& step) {
  std::ifstream in(merged);
  const json events = json::parse(in);
  double start = -1;
  std::map<int64_t, json> begun;
  json flows = json::array();
  for (const json& e : events) {
    if (e.value("pid", -1) != rank) continue;
    if (e.value("cat", "") == "user_annotation" && e.value("name", "") == step) {
      start = e["ts"].get<double>();
    }
    if (e.value("name", "") != "critical_path") continue;
    if (e["ph"] == "s") begun[e["id"].get<int64_t>()] = e;
    if (e["ph"] == "f") {
      const json& s = begun.at(e["id"].get<int64_t>());
      flows.push_back({e["cat"], s["ts"], e["ts"]});
    }
  }
  EXPECT_GE(start, 0) << merged << " has no " << step << " on rank " << rank;
  for (json& f : flows) {
    f[1] = f[1].get<double>() - start;
    f[2] = f[2].get<double>() - start;
  }
  return flows;
}

// Each of `ours` has one of `theirs` of the same type at the same times, HTA's cut to whole µs
// (so ours are up to 1 µs later), and there are as many.
void ExpectSameFlows(const json& ours, const json& theirs, const std::string& what) {
  EXPECT_EQ(ours.size(), theirs.size()) << what;
  std::vector<bool> used(theirs.size(), false);
  auto near = [](const json& a, const json& b) {
    const double d = a.get<double>() - b.get<double>();
    return d > -0.002 && d < 1.002;
  };
  for (const json& f : ours) {
    bool found = false;
    for (size_t i = 0; i < theirs.size() && !found; ++i) {
      const json& h = theirs[i];
      if (used[i] || h[0] != f[0] || !near(f[1], h[1]) || !near(f[2], h[2])) continue;
      used[i] = found = true;
    }
    EXPECT_TRUE(found) << what << ": dtrain's arrow " << f.dump() << " is not among HTA's "
                       << theirs.dump();
  }
}

std::vector<std::string> TracesIn(const fs::path& folder) {
  std::vector<std::string> traces;
  for (const char* file : {"rank0.json.gz", "rank1.json.gz"}) {
    if (fs::exists(folder / file)) traces.push_back((folder / file).string());
  }
  return traces;
}

// Every step of the recorded traces and of each isolated case, dtrain's path against HTA's:
// the same length and the same time bound by the CPU, compute, communication, gaps and launches.
// HTA 0.5 does not count launches by the driver (cuLaunchKernelEx), which dtrain does: the
// recorded traces are compared with those calls renamed to cudaLaunchKernelExC, which both count.
TEST(CriticalPath, AgreesWithHtaStepByStep) {
  RequireFixtures();
  ScratchDir scratch;
  const fs::path dir = scratch.path();
  const std::vector<fs::path> folders = RenamedFixtureAndCases(dir);
  ASSERT_EQ(folders.size(), 1 + 11u);
  const fs::path& renamed = folders.front();
  fs::create_directories(dir / "overlay");
  std::string args = "--overlay " + (dir / "overlay").string();
  for (const fs::path& folder : folders) args += " " + folder.string();
  const json hta = RunHtaScript("hta_critical_path.py", args);
  ASSERT_FALSE(hta.empty());

  int compared = 0, hta_failed = 0, arrows = 0;
  std::map<std::string, int> arrow_types;
  for (const fs::path& folder : folders) {
    const std::vector<std::string> traces = TracesIn(folder);
    const json& theirs = hta.at(folder.string());
    for (int step = 0; step < 4; ++step) {
      const fs::path merged = folder.string() + "-" + std::to_string(step) + ".json";
      const json ours = Paths(traces, merged, std::to_string(step));
      for (const json& p : ours) {
        const std::string what = folder.filename().string() + " rank " +
                                 std::to_string(p["rank"].get<int>()) + " step " +
                                 std::to_string(step);
        ASSERT_FALSE(p.contains("note")) << what << ": " << p.dump();
        const json* match = nullptr;
        for (const json& h : theirs.at(std::to_string(p["rank"].get<int>()))) {
          if (h["step"] == p["step"]) match = &h;
        }
        if (!match) continue;  // HTA left the step out
        if (match->contains("error")) {
          // HTA gives up (a cycle) when one launch has several activities (short_kernels): the
          // pieces run back to back, so dtrain's path is the recorded step's.
          ++hta_failed;
          EXPECT_EQ(folder.filename(), "short_kernels") << what << ": " << match->dump();
          const json recorded = Paths(TracesIn(renamed), dir / "again.json", std::to_string(step));
          EXPECT_NEAR(p["path_ms"].get<double>(), recorded[0]["path_ms"].get<double>(), 1e-6)
              << what;
          continue;
        }
        if (!match->value("whole", false)) continue;  // HTA cut the step short
        ++compared;
        EXPECT_NEAR(p["step_ms"].get<double>() * 1000, (*match)["step_us"].get<double>(), 0.01)
            << what;
        EXPECT_NEAR(p["path_ms"].get<double>() * 1000, (*match)["path_us"].get<double>(), 0.05)
            << what;
        for (const auto& [bound, ms] : p["bound_by_ms"].items()) {
          const double hta_us = (*match)["bound_by_us"].value(bound, 0.0);
          EXPECT_NEAR(ms.get<double>() * 1000, hta_us, 0.05) << what << " " << bound;
        }
        // The arrows drawn into the merged trace are those of HTA's overlay.
        const json flows = MergedFlows(merged, p["rank"].get<int>(), p["step"]);
        ExpectSameFlows(flows, (*match)["flows"], what);
        arrows += static_cast<int>(flows.size());
        for (const json& f : flows) ++arrow_types[f[0].get<std::string>()];
      }
    }
  }
  // 7 recorded steps HTA keeps whole, 3 in each of the 9 other cases; short_kernels' 3 where HTA
  // fails.
  EXPECT_EQ(compared, 7 + 10 * 3);
  EXPECT_EQ(hta_failed, 3);
  EXPECT_GT(arrows, 0);
  std::cout << compared << " steps, " << arrows << " arrows as HTA's overlay draws them:";
  for (const auto& [type, n] : arrow_types) std::cout << " " << type << " " << n;
  std::cout << "\n";
}

// The path drawn into the merged trace of the recorded job: a track per rank whose slices follow
// each other and add up to the path, bound by bound, as the summary gives it; arrows that each
// start and end inside an event of their track (where Perfetto binds them), ids unique.
TEST(CriticalPath, DrawnIntoTheMergedTrace) {
  RequireFixtures();
  ScratchDir dir;
  const fs::path merged = dir / "merged.json";
  const json paths = Paths({kRank0, kRank1}, merged, "1");  // rank 0's path has CPU on it
  ASSERT_EQ(paths.size(), 2u);
  size_t arrows = 0;
  std::ifstream in(merged);
  const json events = json::parse(in);
  for (const json& p : paths) {
    const int rank = p["rank"].get<int>();
    std::map<int, std::vector<std::pair<double, double>>> spans;  // tid -> (ts, end) of X events
    std::string track_name;
    std::map<std::string, double> bound_us;
    double total_us = 0, last_end = -1;
    int slices = 0;
    std::vector<json> flows;
    std::set<int64_t> ids;
    for (const json& e : events) {
      if (e.value("pid", -1) != rank) continue;
      const int tid = e.value("tid", -1);
      if (e["ph"] == "M" && tid == kCriticalPathTrack && e["name"] == "thread_name") {
        track_name = e["args"]["name"];
      }
      if (e["ph"] == "X") {
        const double ts = e["ts"].get<double>(), dur = e.value("dur", 0.0);
        spans[tid].push_back({ts, ts + dur});
        if (tid == kCriticalPathTrack) {
          ++slices;
          EXPECT_GE(ts, last_end - 1e-9) << "slices overlap at " << e.dump();
          last_end = ts + dur;
          bound_us[e["args"]["bound_by"]] += dur;
          total_us += dur;
        }
      }
      if ((e["ph"] == "s" || e["ph"] == "f") && e["name"] == "critical_path") {
        flows.push_back(e);
        if (e["ph"] == "s") {
          EXPECT_TRUE(ids.insert(e["id"].get<int64_t>()).second) << e.dump();
        }
      }
    }
    EXPECT_EQ(track_name, "critical path: " + p["step"].get<std::string>());
    EXPECT_GT(slices, 0);
    EXPECT_NEAR(total_us, p["path_ms"].get<double>() * 1000, 0.001 * slices);
    for (const auto& [bound, ms] : p["bound_by_ms"].items()) {
      EXPECT_NEAR(bound_us[bound], ms.get<double>() * 1000, 0.001 * slices) << bound;
    }
    arrows += flows.size();
    for (const json& f : flows) {
      const double t = f["ts"].get<double>();
      bool inside = false;
      for (const auto& [ts, end] : spans[f["tid"].get<int>()]) {
        inside |= ts - 0.0005 <= t && t <= end + 0.0005;  // the JSON's µs to 3 decimals
      }
      EXPECT_TRUE(inside) << "rank " << rank << ": arrow outside every event: " << f.dump();
    }
  }
  EXPECT_GT(arrows, 0u);
}

TEST(CriticalPath, CommandLine) {
  RequireFixtures();
  ScratchDir dir;
  const std::string dtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";
  const std::string files = " -o " + (dir / "m.json") + " " + kRank0 + " " + kRank1;
  int status = 0;
  std::string out = RunShell(dtrain + " timeline --critical-path 1" + files, &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("--critical-path: needs --summary"), std::string::npos) << out;
  out = RunShell(dtrain + " timeline --summary --critical-path 1" + files, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("critical path of one step per rank"), std::string::npos) << out;
  EXPECT_NE(out.find("   0  ProfilerStep#4"), std::string::npos) << out;
  EXPECT_NE(out.find("   1  ProfilerStep#4"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 0: longest on the path: stream idle after Memcpy DtoD"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("enable_cuda_sync_events=True"), std::string::npos) << out;
  out = RunShell(dtrain + " timeline --summary --critical-path 7" + files, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("rank 0: step 7 asked for; the trace has 4 (0 to 3)"), std::string::npos)
      << out;
}

}  // namespace
}  // namespace dtrain
