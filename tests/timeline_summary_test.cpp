// The summary's figures against a trace built by hand, where every figure is known exactly.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "launcher/timeline/gpu_idle_causes.h"
#include "launcher/timeline/gpu_speed_compare.h"
#include "launcher/timeline/launch_queue.h"
#include "launcher/timeline/step_chart_svg.h"
#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/timeline_summary.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

using testing::ScratchDir;
using testing::WriteFile;

std::string Header(int rank, int64_t start_us, int64_t offset_us) {
  return "[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"name\": \"x\", "
         "\"start_time_since_epoch_in_micros\": " +
         std::to_string(start_us) + ", \"rank\": " + std::to_string(rank) + ", \"host\": \"node-" +
         std::to_string(rank) + "\"}},\n" +
         "{\"name\": \"clock_offset\", \"ph\": \"M\", \"pid\": 0, \"args\": "
         "{\"clock_offset_us\": " +
         std::to_string(offset_us) + ", \"clock_rtt_us\": 20}},\n" +
         "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": "
         "\"compute\"}},\n"
         "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 2, \"args\": {\"name\": "
         "\"fusion.0\"}},\n"
         "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 3, \"args\": {\"name\": "
         "\"fusion.1\"}}";
}

std::string Span(int pid, const char* name, int64_t b, int64_t e, const std::string& args = "") {
  std::string begin = ",\n{\"ph\": \"B\", \"name\": \"" + std::string(name) +
                      "\", \"ts\": " + std::to_string(b) + ", \"pid\": " + std::to_string(pid);
  if (!args.empty()) begin += ", \"args\": {" + args + "}";
  begin += "}";
  if (e < 0) return begin;
  return begin + ",\n{\"ph\": \"E\", \"ts\": " + std::to_string(e) +
         ", \"pid\": " + std::to_string(pid) + "}";
}

std::string EndAt(int pid, int64_t e) {
  return ",\n{\"ph\": \"E\", \"ts\": " + std::to_string(e) + ", \"pid\": " + std::to_string(pid) +
         "}";
}

// Rank 0: two steps; a fused allreduce queued during BACKWARD and running past it; a wait for
// data between the steps; 50 us with nothing open.
std::string RankZero() {
  std::string t = Header(0, 5'000'000, 0);
  t += Span(1, "DATA", 0, 100) + Span(1, "FORWARD", 100, 400) + Span(1, "BACKWARD", 400, -1);
  t += Span(2, "ALLREDUCE", 600, -1, "\"bytes\": 4096, \"tensors\": 2, \"dtype\": \"float32\"");
  t += Span(2, "QUEUE", 600, 700) + Span(2, "GLOO_ALLREDUCE", 700, -1);
  t += EndAt(1, 800);                  // BACKWARD
  t += EndAt(2, 950) + EndAt(2, 950);  // GLOO_ALLREDUCE, ALLREDUCE
  t += Span(1, "OPTIMIZER", 1000, 1100) + Span(1, "WAIT_FOR_DATA", 1100, 1200);
  t += Span(1, "DATA", 1200, 1300) + Span(1, "FORWARD", 1300, 1500) +
       Span(1, "BACKWARD", 1500, 1700) + Span(1, "OPTIMIZER", 1700, 1800);
  return t + "\n]";
}

// Rank 1 (clock 250 us behind rank 0's): one long step, then two fused allreduces, the second
// bigger, after a 100 us gap. Records in time order, as the writer puts them.
std::string RankOne() {
  std::string t = Header(1, 5'000'000, 250);
  t += Span(1, "FORWARD", 0, 1000) + Span(1, "OPTIMIZER", 1000, -1);
  t += Span(2, "ALLREDUCE", 1000, -1, "\"bytes\": 4096, \"tensors\": 2, \"dtype\": \"float32\"");
  t += Span(2, "GLOO_ALLREDUCE", 1000, -1) + EndAt(1, 1200) + EndAt(2, 1500) + EndAt(2, 1500);
  t += Span(3, "NCCL_ALLREDUCE", 1600, 1700, "\"bytes\": 8192, \"tensors\": 5");
  return t + "\n]";
}

TimelineSummary Summarise(const ScratchDir& dir) {
  WriteFile(dir / "rank-0.json", RankZero());
  WriteFile(dir / "rank-1.json", RankOne());
  TimelineSummaryBuilder builder;
  MergeResult merged =
      MergeTimelines({dir / "rank-1.json", dir / "rank-0.json"}, dir / "merged.json",
                     [&](const MergedEvent& e) { builder.Add(e); });
  EXPECT_TRUE(merged.warnings.empty()) << merged.warnings.front();
  EXPECT_EQ(merged.ranks[1].shift_us, 250);
  return builder.Finish(merged.ranks);
}

TEST(TimelineSummary, SplitsEachRanksTimeExactly) {
  ScratchDir dir;
  TimelineSummary s = Summarise(dir);
  ASSERT_EQ(s.ranks.size(), 2u);
  const RankTime& r0 = s.ranks[0];
  EXPECT_EQ(r0.host, "node-0");
  EXPECT_EQ(r0.wall_us, 1800);
  EXPECT_EQ(r0.compute_us, 1500);      // 0-800, 1000-1100, 1200-1800
  EXPECT_EQ(r0.comm_us, 250);          // GLOO_ALLREDUCE 700-950
  EXPECT_EQ(r0.comm_exposed_us, 150);  // 800-950: BACKWARD over
  EXPECT_EQ(r0.wait_us, 100);          // WAIT_FOR_DATA; QUEUE hid behind BACKWARD
  EXPECT_EQ(r0.idle_us, 50);           // 950-1000
  EXPECT_EQ(r0.step_us, (std::vector<int64_t>{1100, 700}));
  const RankTime& r1 = s.ranks[1];
  EXPECT_EQ(r1.wall_us, 1700);
  EXPECT_EQ(r1.compute_us, 1200);
  EXPECT_EQ(r1.comm_us, 600);
  EXPECT_EQ(r1.comm_exposed_us, 400);
  EXPECT_EQ(r1.wait_us, 0);
  EXPECT_EQ(r1.idle_us, 100);
  EXPECT_EQ(r1.step_us, (std::vector<int64_t>{1200}));
}

// dtrain-clip --cuda-graphs --gpu-timed-spans: GRAPH_STEP ends each step as OPTIMIZER does; the
// gpu track (the device's copies of the phases, written a step late) changes no figure.
TEST(TimelineSummary, GraphStepsEndStepsAndTheGpuTrackIsLeftOut) {
  ScratchDir dir;
  std::string t = Header(0, 5'000'000, 0);
  t += ",\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 4, \"args\": {\"name\": "
       "\"gpu\"}}";
  t += Span(1, "DATA", 0, 100) + Span(1, "GRAPH_STEP", 100, 600);
  t += Span(1, "DATA", 600, 700) + Span(4, "GRAPH_STEP", 150, 650);  // the first step's, late
  t += Span(1, "GRAPH_STEP", 700, 1100) + Span(4, "GRAPH_STEP", 750, 1150);
  WriteFile(dir / "rank-0.json", t + "\n]");
  TimelineSummaryBuilder builder;
  MergeResult merged = MergeTimelines({dir / "rank-0.json"}, dir / "merged.json",
                                      [&](const MergedEvent& e) { builder.Add(e); });
  const TimelineSummary s = builder.Finish(merged.ranks);
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].step_us, (std::vector<int64_t>{600, 500}));
  EXPECT_EQ(s.ranks[0].wall_us, 1100);
  EXPECT_EQ(s.ranks[0].compute_us, 1100);
  EXPECT_EQ(s.ranks[0].idle_us, 0);
}

TEST(TimelineSummary, LargestFusedAllreducesGroupedOverRanks) {
  ScratchDir dir;
  TimelineSummary s = Summarise(dir);
  ASSERT_EQ(s.largest.size(), 2u);
  EXPECT_EQ(s.largest[0].track, "fusion.1");
  EXPECT_EQ(s.largest[0].bytes, 8192);
  EXPECT_EQ(s.largest[0].tensors, 5);
  EXPECT_EQ(s.largest[1].track, "fusion.0");
  EXPECT_EQ(s.largest[1].name, "ALLREDUCE");
  EXPECT_EQ(s.largest[1].dtype, "float32");
  EXPECT_EQ(s.largest[1].count, 2);
  EXPECT_EQ(s.largest[1].total_us, 350 + 500);
  EXPECT_EQ(s.largest[1].max_us, 500);
  EXPECT_EQ(s.largest[1].max_rank, 1);
}

TEST(TimelineSummary, ReportNamesTheSlowestRankAndTheOverlap) {
  ScratchDir dir;
  std::string report = FormatTimelineSummary(Summarise(dir));
  // Compute per step: rank 1 1200 us, rank 0 750 us; the median (upper) is 1.20 ms.
  size_t slowest = report.find("slowest ranks");
  ASSERT_NE(slowest, std::string::npos) << report;
  EXPECT_NE(report.find("rank 1 (node-1): 1.20 ms, +0.00 ms", slowest), std::string::npos)
      << report;
  EXPECT_NE(report.find("rank 0 (node-0): 0.75 ms, -0.45 ms (-37.5%)", slowest), std::string::npos)
      << report;
  // 850 us of communication, 550 us of it exposed.
  EXPECT_NE(report.find("0.8 ms over all ranks, 0.6 ms (64.7%) not overlapped"), std::string::npos)
      << report;
  EXPECT_NE(report.find("8.0 KiB"), std::string::npos) << report;
}

TEST(TimelineSummary, StepChartHasABarPerRankAndALinePerRank) {
  ScratchDir dir;
  std::string svg = StepChartSvg(Summarise(dir));
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("rank 0: compute 1.5 ms"), std::string::npos) << svg;
  EXPECT_NE(svg.find("rank 1: compute 1.2 ms"), std::string::npos) << svg;
}

TEST(TimelineSummary, StepChartAxisTicksAreRoundNumbers) {
  struct Case {
    double max;
    double step, top;
    int decimals;
  };
  for (const Case& c : {Case{1142.5, 250, 1250, 0}, Case{1.5, 0.5, 1.5, 1}, Case{7, 2, 8, 0},
                        Case{0.75, 0.2, 0.8, 1}, Case{12.0, 2.5, 12.5, 1}, Case{100, 20, 100, 0},
                        Case{0.0005, 0.0001, 0.0005, 4}}) {
    AxisScale s = RoundAxis(c.max);
    EXPECT_DOUBLE_EQ(s.step, c.step) << c.max;
    EXPECT_NEAR(s.top, c.top, 1e-12) << c.max;
    EXPECT_GE(s.top, c.max);
    EXPECT_LE(s.ticks, 5) << c.max;
    EXPECT_EQ(s.decimals, c.decimals) << c.max;
  }
  // The chart's own axis labels: each a multiple of the axis step, from 0 to the top.
  ScratchDir dir;
  TimelineSummary summary = Summarise(dir);
  std::string svg = StepChartSvg(summary);
  const std::string marker = "text-anchor=\"end\">";
  std::vector<double> labels;
  for (size_t at = svg.find(marker); at != std::string::npos; at = svg.find(marker, at + 1)) {
    labels.push_back(std::stod(svg.substr(at + marker.size())));
  }
  ASSERT_GE(labels.size(), 4u) << svg;
  const double step = labels[1] - labels[0];
  EXPECT_DOUBLE_EQ(labels[0], 0.0);
  for (double v : labels) {
    EXPECT_NEAR(v / step, std::round(v / step), 1e-6) << v << " in\n" << svg;
    double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
    EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 ||
                std::fabs(mantissa - 2.5) < 1e-6 || std::fabs(mantissa - 5) < 1e-6)
        << step;
  }
}

TEST(TimelineSummary, ClassifiesHorovodActivities) {
  EXPECT_EQ(ClassifySpan("compute", "FORWARD"), SpanKind::kCompute);
  EXPECT_EQ(ClassifySpan("compute", "WAIT_FOR_DATA"), SpanKind::kWait);
  EXPECT_EQ(ClassifySpan("grad.w", "NEGOTIATE_ALLREDUCE"), SpanKind::kWait);
  EXPECT_EQ(ClassifySpan("grad.w", "QUEUE"), SpanKind::kWait);
  EXPECT_EQ(ClassifySpan("grad.w", "MEMCPY_IN_FUSION_BUFFER"), SpanKind::kComm);
  EXPECT_EQ(ClassifySpan("grad.w", "NCCL_ALLREDUCE"), SpanKind::kComm);
  EXPECT_EQ(ClassifySpan("features", "ALLGATHER"), SpanKind::kComm);
}

// A GPU activity on `stream` from `start` to `end`, launched at `launched` by a call of `call_us`.
LaunchedActivity Launched(int64_t stream, double start, double end, double launched, double call_us,
                          LaunchCallKind call = LaunchCallKind::kRuntime) {
  LaunchedActivity a;
  a.stream = stream;
  a.start = start;
  a.end = end;
  a.launched_at = launched;
  a.call = call;
  a.call_start = launched;
  a.call_duration = call_us;
  return a;
}

// Each gap on a stream by its cause, as HTA sorts them, and the launch figures, where every one is
// known: a gap of 5 us launched early (kernel wait), one launched after the last activity ended
// (host wait, 80), one of 90 us launched early (other), one overlapping the activity before it
// (kernel wait, -5), and a stream with a single activity (no gap).
TEST(GpuIdleCauses, EachGapHasItsCauseAndTheTablesSayWhatDominates) {
  const std::vector<LaunchedActivity> activities = {
      Launched(7, 200, 210, 60, 2),   // gap 90 after 110; launched before it: other
      Launched(7, 0, 10, -5, 3),      // the first: no gap
      Launched(7, 15, 20, 1, 4),      // gap 5 under 30 us, launched before 10: kernel wait
      Launched(7, 100, 110, 50, 60),  // launched at 50, after 20: host wait 80
      Launched(7, 205, 215, 70, 1, LaunchCallKind::kDriver),  // starts before 210 ends: -5
      Launched(9, 40, 45, 30, 2),
  };
  const GpuIdleCauses causes = FindGpuIdleCauses(activities);
  ASSERT_EQ(causes.streams.size(), 2u);
  const StreamIdle& s7 = causes.streams[0];
  EXPECT_EQ(s7.stream, 7);
  EXPECT_EQ(s7.activities, 5);
  EXPECT_DOUBLE_EQ(s7.span_us, 215);
  EXPECT_DOUBLE_EQ(s7.busy_us, 45);
  EXPECT_DOUBLE_EQ(s7.host_wait_us, 80);
  EXPECT_DOUBLE_EQ(s7.kernel_wait_us, 0);  // 5 and -5
  EXPECT_DOUBLE_EQ(s7.other_us, 90);
  const StreamIdle& s9 = causes.streams[1];
  EXPECT_EQ(s9.stream, 9);
  EXPECT_DOUBLE_EQ(s9.idle_us(), 0);
  EXPECT_DOUBLE_EQ(s9.span_us, 5);

  // Delays (start less the call's end, never below 0): 138, 2, 10, 0, 134, 8.
  const KernelLaunches& l = causes.launches;
  EXPECT_EQ(l.launches, 6);
  EXPECT_EQ(l.driver_launches, 1);
  EXPECT_DOUBLE_EQ(l.delay_median_us, 9);  // (8 + 10) / 2
  EXPECT_DOUBLE_EQ(l.delay_max_us, 138);
  EXPECT_EQ(l.delayed, 2);            // over 100 us
  EXPECT_EQ(l.slow_calls, 1);         // the 60 us call
  EXPECT_EQ(l.shorter_than_call, 1);  // its 10 us kernel

  const std::string text = FormatGpuIdleCauses({{3, causes}});
  EXPECT_NE(text.find("Other waits are most of the idle time on rank 3 (stream 7)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("Host wait is most"), std::string::npos) << text;
  EXPECT_NE(text.find("1 by the driver's cuLaunchKernel(Ex)"), std::string::npos) << text;
  // Stream 9 carries 10% of the work: listed, and too little idle to point at.
  EXPECT_NE(text.find("\n    3       9 "), std::string::npos) << text;

  // Most kernels shorter than their launch: the launches set the pace.
  std::vector<LaunchedActivity> tiny;
  for (int i = 0; i < 10; ++i) tiny.push_back(Launched(7, 10.0 * i, 10.0 * i + 2, 10.0 * i - 4, 3));
  EXPECT_NE(FormatGpuIdleCauses({{0, FindGpuIdleCauses(tiny)}})
                .find("Most kernels of rank 0 ran in less time than the CPU took to launch them"),
            std::string::npos);
}

// A stream's launch queue as HTA counts it: +1 when a launch call starts, -1 when its activity
// starts, summarised over the points where it changed. Stream 7: calls at 0, 1, 2, 3 and their
// kernels at 10, 11, 20, 30, so the lengths run 1 2 3 4 3 2 1 0 (mean 2, max 4), and at 3 or
// more from 2 to 11 (9 us). An activity without a launch call does not count; a driver launch
// does. Stream 11: a launch at the instant another kernel starts counts first (1 2 1 0).
TEST(LaunchQueue, EachStreamsLengthChangesAtLaunchesAndStarts) {
  std::vector<LaunchedActivity> activities = {
      Launched(7, 30, 31, 3, 1), Launched(7, 10, 12, 0, 1),
      Launched(7, 20, 21, 2, 1), Launched(7, 11, 12, 1, 1, LaunchCallKind::kDriver),
      Launched(9, 5, 6, 4, 1),   Launched(9, 50, 51, 40, 1, LaunchCallKind::kNone),
      Launched(11, 8, 9, 5, 1),  Launched(11, 9, 10, 8, 1)};
  const std::vector<StreamQueue> queues = LaunchQueueByStream(activities, 3);
  ASSERT_EQ(queues.size(), 3u);
  EXPECT_EQ(queues[2].stream, 11);
  EXPECT_DOUBLE_EQ(queues[2].mean, 1.0);
  EXPECT_EQ(queues[2].max, 2);
  EXPECT_EQ(queues[0].stream, 7);
  EXPECT_EQ(queues[0].points, 8);
  EXPECT_DOUBLE_EQ(queues[0].mean, 2.0);
  EXPECT_EQ(queues[0].max, 4);
  EXPECT_DOUBLE_EQ(queues[0].full_us, 9.0);
  EXPECT_EQ(queues[1].stream, 9);
  EXPECT_EQ(queues[1].points, 2);
  EXPECT_DOUBLE_EQ(queues[1].mean, 0.5);
  EXPECT_DOUBLE_EQ(queues[1].full_us, 0.0);
  // At CUDA's 1,024 the queue is never full here; the table names a full one only.
  EXPECT_DOUBLE_EQ(LaunchQueueByStream(activities)[0].full_us, 0.0);
  const std::string text = FormatLaunchQueues({{2, {queues[0], queues[1]}}});
  EXPECT_NE(text.find("\n    2       7         4         2.0          4           0.009\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("The launch queue was full on rank 2 stream 7 (0.009 ms)"), std::string::npos)
      << text;
  EXPECT_EQ(FormatLaunchQueues({{2, LaunchQueueByStream(activities)}}).find("was full"),
            std::string::npos);
}

// Four ranks at the same work: rank 2's kernels take 20% longer each time, rank 0 once ran a
// kernel 50 times as long (another process's time slice), rank 3 copies to its GPU at half the
// rate; rank 1 ran a kernel no other rank ran. The median durations see rank 2 and rank 3 and
// nothing else.
TEST(GpuSpeed, TheRankSlowerAtTheSameWorkIsNamedAndOneOutlierIsNot) {
  std::map<int, RankWork> compute, to_gpu, from_gpu;
  for (int rank = 0; rank < 4; ++rank) {
    const double slow = rank == 2 ? 1.2 : 1.0;
    compute[rank]["gemm"].durations_us = {10 * slow, 10 * slow, 10 * slow};
    compute[rank]["gelu"].durations_us = {2 * slow, 2 * slow};
    SameWork& copy = to_gpu[rank]["Memcpy HtoD (Pinned -> Device) 1000000 bytes"];
    copy.bytes = 1000000;
    copy.durations_us = {rank == 3 ? 80.0 : 40.0, rank == 3 ? 80.0 : 40.0};
  }
  compute[0]["gemm"].durations_us[1] = 500;
  compute[1]["only_here"].durations_us = {1000};
  const std::vector<RankSpeed> speeds = CompareGpuSpeed(compute, to_gpu, from_gpu);
  ASSERT_EQ(speeds.size(), 4u);
  EXPECT_DOUBLE_EQ(speeds[0].compute.ratio, 1.0);
  EXPECT_DOUBLE_EQ(speeds[1].compute.ratio, 1.0);
  EXPECT_NEAR(speeds[2].compute.ratio, 1.2, 1e-12);
  EXPECT_EQ(speeds[1].compute.kinds, 2);  // gemm and gelu: only_here is not compared
  EXPECT_EQ(speeds[1].compute.count, 5);
  EXPECT_NEAR(speeds[0].to_gpu.gigabytes_per_second(), 25.0, 1e-9);  // 1 MB in 40 us
  EXPECT_NEAR(speeds[3].to_gpu.gigabytes_per_second(), 12.5, 1e-9);
  EXPECT_DOUBLE_EQ(speeds[3].to_gpu.ratio, 2.0);
  EXPECT_DOUBLE_EQ(speeds[3].from_gpu.ratio, -1);  // no copies from the GPU

  const std::string text = FormatGpuSpeed(speeds, {{2, "node-b"}});
  EXPECT_NE(text.find("Rank 2 (node-b) runs the same compute kernels 20% slower"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Rank 3 copies to its GPU at 12.5 GB/s, 2.0x the median rank's time"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("Rank 0"), std::string::npos) << text;

  // Of two ranks, the slower one stands out against the faster.
  compute.erase(2);
  compute.erase(3);
  to_gpu.clear();
  compute[1]["gemm"].durations_us = {13, 13, 13};
  const std::vector<RankSpeed> two = CompareGpuSpeed(compute, to_gpu, from_gpu);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_DOUBLE_EQ(two[0].compute.ratio, 1.0);
  EXPECT_NEAR(two[1].compute.ratio, (3 * 13.0 + 2 * 2) / (3 * 10.0 + 2 * 2), 1e-12);
  // One rank has nothing to compare against.
  compute.erase(1);
  EXPECT_TRUE(CompareGpuSpeed(compute, to_gpu, from_gpu).empty());
}

}  // namespace
}  // namespace dtrain
