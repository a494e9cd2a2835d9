// `dtrain timeline --summary --kernel-sequences OPERATOR`: the CPU events named like OPERATOR at
// the shallowest call depth, each with the GPU activities it (and its callees) launched, counted
// by pattern; by hand, and against HolisticTraceAnalysis's get_frequent_cuda_kernel_sequences
// (tests/kineto/hta_kernel_sequences.py, HTA 0.5.0 run in the test at nanosecond precision) on the
// recorded H100 ranks and every isolated case of tests/kineto/hta_cases.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/kernel_sequences.h"
#include "launcher/timeline/timeline_report.h"
#include "tests/support/kineto_fixtures.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ReadFile;
using testing::ScratchDir;

constexpr int kMain = 1, kBackward = 2, kGpu = 3;

struct Events {
  KernelSequenceBuilder* builder;
  int64_t correlation = 1;
  void Cpu(int thread, const char* name, double start, double end, int64_t corr = -1) {
    builder->Add(KinetoEvent{0, "cpu_op", name, start, end - start, -1, corr, -1, thread});
  }
  // A launch call at `at` on `thread` and its kernel on the GPU's track.
  void Launch(int thread, double at, const char* kernel, double kernel_at, double dur) {
    Cpu(thread, "cudaLaunchKernel", at, at + 2, correlation);
    builder->Add(KinetoEvent{0, "kernel", kernel, kernel_at, dur, 7, correlation, -1, kGpu});
    ++correlation;
  }
};

// Three profiler steps (the last one cut, as HTA cuts it); aten::linear under the step with three
// kernels (twice), with two (too few), and nested deeper under another event (not at the
// shallowest depth); autograd's thread, whose outermost events hang under the step that spans
// them; the GPU's own annotation of a step, which is no CPU event.
TEST(KernelSequences, ShallowestMatchesTheirKernelsInOrderAndTheBackwardThreadUnderItsStep) {
  auto run = [](const std::string& op, int min_len) {
    KernelSequenceBuilder b(op, min_len);
    Events e{&b};
    e.Cpu(kMain, "ProfilerStep#1", 0, 1000);
    e.Cpu(kMain, "ProfilerStep#2", 1000, 2000);
    e.Cpu(kMain, "ProfilerStep#3", 2000, 3000);
    for (double at : {100.0, 1100.0, 2100.0}) {  // the third is in the cut step
      e.Cpu(kMain, "aten::linear", at, at + 100);
      e.Cpu(kMain, "aten::addmm", at + 10, at + 90);
      e.Launch(kMain, at + 40, "bias", at + 220, 5);  // launched second, starts second
      e.Launch(kMain, at + 20, "gemm", at + 200, 10);
      e.Launch(kMain, at + 60, "relu", at + 240, 2);
    }
    e.Cpu(kMain, "aten::linear", 1300, 1400);  // two kernels: too few
    e.Launch(kMain, 1310, "gemm", 1500, 10);
    e.Launch(kMain, 1320, "bias", 1520, 5);
    e.Cpu(kMain, "forward", 400, 600);  // an aten::linear one level deeper: not counted
    e.Cpu(kMain, "aten::linear", 410, 500);
    for (int i = 0; i < 3; ++i) e.Launch(kMain, 420 + 10 * i, "deep", 650 + 10 * i, 1);
    e.Cpu(kBackward, "autograd::engine::evaluate_function: AddmmBackward0", 700, 800);
    e.Launch(kBackward, 710, "dgrad", 850, 20);
    e.Launch(kBackward, 720, "wgrad", 880, 20);
    e.Launch(kBackward, 730, "sum", 905, 3);
    b.Add(KinetoEvent{0, "gpu_user_annotation", "ProfilerStep#1", 200, 700, -1, -1, -1, kGpu});
    return b.Finish();
  };
  const KernelSequences linear = run("aten::linear", 3);
  ASSERT_EQ(linear.ranks.size(), 1u);
  EXPECT_EQ(linear.ranks[0].depth, 1);
  ASSERT_EQ(linear.ranks[0].sequences.size(), 1u);
  const KernelSequence& s = linear.ranks[0].sequences[0];
  EXPECT_EQ(s.op, "aten::linear");
  EXPECT_EQ(s.kernels, (std::vector<std::string>{"gemm", "bias", "relu"}));
  EXPECT_EQ(s.count, 2);
  EXPECT_DOUBLE_EQ(s.gpu_us, 2 * (10 + 5 + 2));
  EXPECT_DOUBLE_EQ(s.cpu_us, 200);
  EXPECT_TRUE(run("aten::linear", 4).ranks[0].sequences.empty());
  ASSERT_EQ(run("aten::linear", 2).ranks[0].sequences.size(), 2u);  // the pair counts now
  EXPECT_EQ(run("aten::linear", 2).ranks[0].sequences[0].count, 2);

  // The step holds its own kernels and the backward thread's, by their start on the GPU.
  const KernelSequences steps = run("ProfilerStep", 3);
  EXPECT_EQ(steps.ranks[0].depth, 0);
  ASSERT_EQ(steps.ranks[0].sequences.size(), 2u);  // #1 and #2; #3 is the cut step
  const KernelSequence& first = steps.ranks[0].sequences[0];
  EXPECT_EQ(first.op, "ProfilerStep#1");
  EXPECT_EQ(first.kernels, (std::vector<std::string>{"gemm", "bias", "relu", "deep", "deep", "deep",
                                                     "dgrad", "wgrad", "sum"}));
  EXPECT_EQ(steps.ranks[0].sequences[1].kernels.size(), 5u);  // #2: 3 + the pair
  const KernelSequences backward = run("autograd::engine", 3);
  EXPECT_EQ(backward.ranks[0].depth, 1);  // under ProfilerStep#1
  ASSERT_EQ(backward.ranks[0].sequences.size(), 1u);
  EXPECT_EQ(backward.ranks[0].sequences[0].kernels,
            (std::vector<std::string>{"dgrad", "wgrad", "sum"}));

  const std::string text = FormatKernelSequences(linear);
  EXPECT_NE(text.find("Frequent kernel sequences of \"aten::linear\""), std::string::npos) << text;
  EXPECT_NE(text.find("gemm"), std::string::npos) << text;
  EXPECT_NE(FormatKernelSequences(run("nothing", 3)).find("no CPU event"), std::string::npos);
}

// The options' rules, and the text `dtrain timeline` prints.
TEST(KernelSequences, CommandLine) {
  test::RequireFixtures();
  ScratchDir dir;
  const std::string dtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";
  const std::string files = " -o " + (dir / "m.json") + " " + test::kRank0 + " " + test::kRank1;
  int status = 0;
  std::string out = test::RunShell(dtrain + " timeline --kernel-sequences aten::" + files, &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("--kernel-sequences: needs --summary"), std::string::npos) << out;
  out = test::RunShell(dtrain + " timeline --summary --min-pattern-len 2" + files, &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("--min-pattern-len: needs --kernel-sequences"), std::string::npos) << out;
  out = test::RunShell(dtrain + " timeline --summary --kernel-sequences autograd::engine" + files,
                       &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("Frequent kernel sequences of \"autograd::engine\" (rank 0: the events at "
                     "call depth 1 with 3 or more GPU activities; 3 pattern(s)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("     12 "), std::string::npos) << out;  // AddmmBackward0's first pattern
}

// HTA's table for every rank of each folder and each name: the same patterns in the same order,
// the same counts, the same CPU time, the same GPU time (to 1e-4 of it: HTA sums its own rounding
// of the activities' times). Where HTA finds nothing and dtrain does, the name is one the GPU's
// side of an annotation carries (Kineto records it without a stream; HTA takes it for a CPU event
// of depth -1, the shallowest, with no kernels), which the test checks in the trace.
TEST(KernelSequences, AgreeWithHolisticTraceAnalysis) {
  test::RequireFixtures();
  ScratchDir scratch;
  const fs::path dir = scratch.path();
  const std::vector<std::string> names = {"autograd::engine", "ProfilerStep", "aten::linear",
                                          "Optimizer"};
  std::vector<std::pair<fs::path, int>> runs;
  for (const fs::path& folder : test::FixturesAndCases(dir)) runs.push_back({folder, 3});
  runs.push_back({test::kFixtures, 1});
  auto traces = [](const fs::path& folder) {  // the folder's .json.gz files, by name
    std::vector<std::string> out;
    for (const auto& entry : fs::directory_iterator(folder)) {
      const std::string path = entry.path().string();
      if (path.size() > 8 && path.compare(path.size() - 8, 8, ".json.gz") == 0) out.push_back(path);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  int compared = 0, empty_in_hta = 0;
  for (const auto& [folder, min_len] : runs) {
    std::string args = folder.string() + " " + std::to_string(min_len);
    for (const std::string& n : names) args += " " + n;
    const json hta = test::RunHtaScript("hta_kernel_sequences.py", args);
    ASSERT_FALSE(hta.empty());
    std::string annotations;  // the gpu_user_annotation records' names, all ranks
    for (const std::string& trace : traces(folder)) {
      const json doc = json::parse(test::Gunzip(trace));
      for (const json& e : doc["traceEvents"]) {
        if (e.value("cat", "") == "gpu_user_annotation") annotations += e.value("name", "") + "\n";
      }
    }
    for (const std::string& name : names) {
      TimelineRequest request;
      request.inputs = traces(folder);
      request.output = (dir / "merged.json").string();
      request.summary = true;
      request.kernel_sequences = name;
      request.min_pattern_len = min_len;
      const TimelineReport report = MakeTimeline(request);
      ASSERT_TRUE(report.kernel_sequences.has_value()) << name;
      // The merged trace marks the runs of each rank's top five patterns, a slice each.
      std::map<std::pair<int, int>, int64_t> marked;  // (rank, pattern) -> slices
      for (const json& e : json::parse(ReadFile(request.output))) {
        if (e.value("cat", "") == "kernel_sequence") {
          EXPECT_EQ(e["tid"], kKernelSequencesTrack);
          ++marked[{e["pid"].get<int>(), e["args"]["pattern"].get<int>()}];
        }
      }
      for (const RankKernelSequences& r : report.kernel_sequences->ranks) {
        for (size_t i = 0; i < r.sequences.size(); ++i) {
          const int64_t runs = i < 5 ? r.sequences[i].count : 0;
          EXPECT_EQ((marked[{r.rank, static_cast<int>(i + 1)}]), runs)
              << folder.filename() << " rank " << r.rank << " " << name << " #" << i + 1;
        }
      }
      for (const auto& [rank_text, by_name] : hta.items()) {
        const std::string what = folder.filename().string() + " rank " + rank_text + " " + name +
                                 " min " + std::to_string(min_len);
        const json& theirs = by_name.at(name);
        ASSERT_TRUE(theirs.is_array()) << what << ": " << theirs;
        const RankKernelSequences* mine = nullptr;
        for (const RankKernelSequences& r : report.kernel_sequences->ranks) {
          if (r.rank == std::stoi(rank_text)) mine = &r;
        }
        ASSERT_NE(mine, nullptr) << what;
        if (theirs.empty() && !mine->sequences.empty()) {
          EXPECT_NE(annotations.find(name), std::string::npos) << what;
          ++empty_in_hta;
          continue;
        }
        ASSERT_EQ(mine->sequences.size(), theirs.size()) << what;
        for (size_t i = 0; i < theirs.size(); ++i) {
          const KernelSequence& s = mine->sequences[i];
          std::string pattern = s.op;
          for (const std::string& k : s.kernels) pattern += "|" + k;
          EXPECT_EQ(pattern, theirs[i]["pattern"].get<std::string>()) << what << " #" << i;
          EXPECT_EQ(s.count, theirs[i]["count"].get<int64_t>()) << what << " #" << i;
          const double gpu = theirs[i]["gpu_us"], cpu = theirs[i]["cpu_us"];
          EXPECT_NEAR(s.gpu_us, gpu, 1e-4 * gpu + 1e-6) << what << " #" << i;
          EXPECT_NEAR(s.cpu_us, cpu, 1e-3) << what << " #" << i;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 100);
  EXPECT_GE(empty_in_hta, 2);  // the gpu_annotations case's ProfilerStep, the fixture's Optimizer
  std::cout << compared << " patterns as HTA's; " << empty_in_hta
            << " names HTA finds none of (its GPU-side annotations at depth -1)\n";
}

}  // namespace
}  // namespace dtrain
