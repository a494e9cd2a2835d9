// `dtrain timeline --summary`'s late GPUs: per profiler step, the ranks whose GPU started the
// compared NCCL kernel last; by hand, and against HolisticTraceAnalysis's
// get_potential_stragglers (tests/kineto/hta_stragglers.py, HTA 0.5.0 run in the test) on four
// ranks made from the recorded H100 trace (tests/kineto/late_nccl_ranks.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/late_nccl_kernels.h"
#include "launcher/timeline/timeline_report.h"
#include "tests/support/kineto_fixtures.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::RequireFixtures;
using test::RunHtaScript;
using testing::ScratchDir;

TEST(LateNccl, ProfilerStepNumbersAsHtaReadsThem) {
  EXPECT_EQ(ProfilerStepNumber("ProfilerStep#12"), 12);
  EXPECT_EQ(ProfilerStepNumber("ProfilerStep # 7"), 7);
  EXPECT_EQ(ProfilerStepNumber("ProfilerStep#0"), 0);
  EXPECT_EQ(ProfilerStepNumber("MyProfilerStep#1"), -1);
  EXPECT_EQ(ProfilerStepNumber("ProfilerStep"), -1);
  EXPECT_EQ(ProfilerStepNumber("ProfilerStep#"), -1);
}

// Three ranks, steps 0 to 2 of 1,000 us each. Per step, on stream 5: "ncclKernel_A" (lengths
// 200 to 202 us; rank 2 starts it 50 late, rank 0 30 late in step 2; of two runs the last counts,
// an earlier one with rank 0 late does not), "ncclKernel_B" (lengths differ by 0.4 us, rank 0
// late), "ncclKernel_C" of 9 us and less (under 1% of a step, lengths differ most, rank 0 late),
// and on stream 0 "ncclKernel_D" (lengths differ by 300 us, rank 1 late): HTA leaves out C, D and
// step 0.
TEST(LateNccl, TheRankThatStartsTheMostVaryingKernelLateIsNamed) {
  LateNcclKernelBuilder b;
  for (int rank = 0; rank < 3; ++rank) {
    for (int step = 0; step < 3; ++step) {
      const double t = 1000.0 * step;
      b.AddStep(step, t, t + 1000);
      const double late_a = rank == 2 ? 50 : (rank == 0 && step == 2 ? 30 : 5 * rank);
      b.AddKernel(rank, step, 5, "ncclKernel_A", t + 100 + (rank == 0 ? 90 : 0), t + 300);
      const double a = t + 400 + late_a;
      b.AddKernel(rank, step, 5, "ncclKernel_A", a, a + 200 + rank);
      const double b_start = t + 700 + (rank == 0 ? 60 : 0);
      b.AddKernel(rank, step, 5, "ncclKernel_B", b_start, b_start + 100 + 0.2 * rank);
      const double c = t + 900 + (rank == 0 ? 40 : 0);
      b.AddKernel(rank, step, 5, "ncclKernel_C", c, c + 1 + 4 * rank);
      b.AddKernel(rank, step, 0, "ncclKernel_D", t + 100 + (rank == 1 ? 300 : 0), t + 800);
    }
  }
  const LateNcclKernels late = b.Finish();
  EXPECT_EQ(late.kernel, "ncclKernel_A");
  EXPECT_EQ(late.stream, 5);
  EXPECT_EQ(late.steps, 2);
  EXPECT_DOUBLE_EQ(late.mean_step_ms, 1.0);
  ASSERT_EQ(late.ranks.size(), 3u);
  // Step 1: rank 2 (50 late), then rank 1 (5); step 2: rank 2, then rank 0 (30). Of ranks 0 and
  // 1, each among the latest once, rank 0 is further behind on average (12.5 us against 2.5).
  EXPECT_EQ(late.ranks[0].rank, 2);
  EXPECT_EQ(late.ranks[0].steps_latest, 2);
  EXPECT_EQ(late.ranks[0].steps, 2);
  EXPECT_NEAR(late.ranks[0].mean_behind_ms, 0.0475, 1e-12);  // 50 after rank 0, 45 after rank 1
  EXPECT_EQ(late.ranks[1].rank, 0);
  EXPECT_EQ(late.ranks[1].steps_latest, 1);
  EXPECT_NEAR(late.ranks[1].mean_behind_ms, 0.0125, 1e-12);
  EXPECT_EQ(late.ranks[2].rank, 1);
  EXPECT_EQ(late.ranks[2].steps_latest, 1);
  EXPECT_EQ(late.stragglers, (std::vector<int>{2, 0}));
  const std::string text = FormatLateNcclKernels(late);
  EXPECT_NE(text.find("HTA's potential stragglers: ranks 2, 0"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 2: among the 2 latest in 2 of 2 steps"), std::string::npos) << text;
  EXPECT_EQ(LateNcclKernelsJson(late)["ranks"][0]["rank"], 2);

  // Fewer ranks than candidates: each is among the latest; one rank alone compares nothing.
  LateNcclKernelBuilder two;
  for (int rank = 0; rank < 2; ++rank) {
    two.AddStep(1, 0, 1000);
    two.AddKernel(rank, 1, 3, "ncclDevKernel_AllReduce", 100 + 10 * rank, 500);
  }
  const LateNcclKernels pair = two.Finish(3);
  ASSERT_EQ(pair.ranks.size(), 2u);
  EXPECT_EQ(pair.ranks[0].rank, 1);
  EXPECT_EQ(pair.ranks[0].steps_latest, 1);
  EXPECT_EQ(pair.ranks[1].steps_latest, 1);
  LateNcclKernelBuilder one;
  one.AddStep(1, 0, 1000);
  one.AddKernel(0, 1, 3, "ncclKernel_A", 100, 500);
  EXPECT_TRUE(one.Finish().kernel.empty());
  EXPECT_EQ(FormatLateNcclKernels(one.Finish()), "");
  EXPECT_TRUE(LateNcclKernelsJson(one.Finish()).is_null());
}

// late_nccl_ranks.py's four ranks in `folder`, their NCCL kernels named with `prefix`; false
// (saying why) when the script failed.
::testing::AssertionResult MakeLateRanks(const fs::path& folder, const std::string& prefix) {
  int status = 0;
  const std::string made =
      test::RunShell(test::kPython + " " + DTRAIN_SOURCE_DIR + "/tests/kineto/late_nccl_ranks.py " +
                         test::kRank0 + " " + folder.string() + " " + prefix,
                     &status);
  if (status == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << made;
}

// The ranks' traces in `folder`, by name.
std::vector<std::string> TracesIn(const fs::path& folder) {
  std::vector<std::string> traces;
  for (const auto& entry : fs::directory_iterator(folder)) traces.push_back(entry.path().string());
  std::sort(traces.begin(), traces.end());
  return traces;
}

// Four ranks, rank 2's all-reduce late in every step (late_nccl_ranks.py says how): HTA's
// kernel, stream, count per rank and potential stragglers. With NCCL 2.19's kernel names
// (ncclDevKernel_*) dtrain finds the same; HTA 0.5 recognises ncclKernel* only and raises.
TEST(LateNccl, AgreeWithHolisticTraceAnalysis) {
  RequireFixtures();
  ScratchDir scratch;
  const fs::path dir = scratch.path();
  for (const std::string prefix : {"ncclKernel", "ncclDevKernel"}) {
    const fs::path folder = dir / prefix;
    ASSERT_TRUE(MakeLateRanks(folder, prefix));
    const LateNcclKernels ours =
        test::SummarizeFolder(folder, dir / (prefix + "-merged.json")).gpu.late_gpus;
    const json hta = RunHtaScript("hta_stragglers.py", folder.string());
    std::cout << prefix << ": HTA " << hta.dump() << "\n" << FormatLateNcclKernels(ours);
    EXPECT_EQ(ours.kernel, prefix +
                               "_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, "
                               "ncclWork*)");
    EXPECT_EQ(ours.stream, 21);
    EXPECT_EQ(ours.steps, 3);
    EXPECT_EQ(ours.stragglers, (std::vector<int>{2, 3}));
    if (prefix == "ncclDevKernel") {
      EXPECT_NE(hta.value("error", "").find("empty sequence"), std::string::npos) << hta.dump();
      continue;
    }
    EXPECT_EQ(ours.kernel, hta["kernel"]);
    EXPECT_EQ(ours.stream, hta["stream"]);
    EXPECT_EQ(ours.steps, static_cast<int>(hta["steps"].size()));
    EXPECT_EQ(json(ours.stragglers), hta["stragglers"]);
    ASSERT_EQ(ours.ranks.size(), hta["counts"].size());
    for (const LateKernelRank& r : ours.ranks) {
      EXPECT_EQ(r.steps_latest, hta["counts"][std::to_string(r.rank)]) << "rank " << r.rank;
    }
    // HTA's num_candidates other than its default: `--straggler-candidates`.
    for (const int candidates : {1, 3}) {
      TimelineRequest request;
      request.inputs = TracesIn(folder);
      request.output = (dir / "candidates.json").string();
      request.summary = true;
      request.straggler_candidates = candidates;
      const LateNcclKernels late = MakeTimeline(request).gpu.late_gpus;
      const json theirs =
          RunHtaScript("hta_stragglers.py", folder.string() + " " + std::to_string(candidates));
      std::cout << candidates << " candidates: HTA " << theirs.dump() << "\n"
                << FormatLateNcclKernels(late);
      EXPECT_EQ(late.candidates, candidates);
      // The same ranks. With 3, ranks 1 to 3 tie (latest in every step): HTA lists them in the
      // order pandas' sort leaves them, dtrain the furthest behind first.
      std::vector<int> ours_sorted = late.stragglers, theirs_sorted = theirs["stragglers"];
      std::sort(ours_sorted.begin(), ours_sorted.end());
      std::sort(theirs_sorted.begin(), theirs_sorted.end());
      EXPECT_EQ(ours_sorted, theirs_sorted) << candidates << " candidates";
      EXPECT_EQ(late.stragglers,
                (candidates == 1 ? std::vector<int>{2} : std::vector<int>{2, 1, 3}));
      ASSERT_EQ(late.ranks.size(), theirs["counts"].size());
      for (const LateKernelRank& r : late.ranks) {
        EXPECT_EQ(r.steps_latest, theirs["counts"][std::to_string(r.rank)])
            << "rank " << r.rank << ", " << candidates << " candidates";
      }
    }
  }
  // The recorded ranks ran Gloo: no NCCL kernel, no section.
  const TimelineReport fixtures = test::SummarizeFolder(test::kFixtures, dir / "fixtures.json");
  EXPECT_TRUE(fixtures.gpu.late_gpus.kernel.empty());
}

// `--straggler-candidates N`: its rules, and the late GPUs' section it changes.
TEST(LateNccl, CommandLine) {
  RequireFixtures();
  ScratchDir scratch;
  const fs::path dir = scratch.path();
  ASSERT_TRUE(MakeLateRanks(dir / "ranks", "ncclKernel"));
  const std::string dtrain = std::string(DTRAIN_BINARY_DIR) + "/dtrain";
  std::string files = " -o " + (dir / "m.json").string();
  for (const std::string& trace : TracesIn(dir / "ranks")) files += " " + trace;
  int status = 0;
  std::string out = test::RunShell(dtrain + " timeline --straggler-candidates 3" + files, &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("--straggler-candidates: needs --summary"), std::string::npos) << out;
  out = test::RunShell(dtrain + " timeline --summary --straggler-candidates 0" + files, &status);
  EXPECT_EQ(status, 2) << out;
  EXPECT_NE(out.find("--straggler-candidates"), std::string::npos) << out;
  out = test::RunShell(dtrain + " timeline --summary" + files, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("HTA's potential stragglers: ranks 2, 3): "), std::string::npos) << out;
  EXPECT_NE(out.find("  rank 2: among the 2 latest in 3 of 3 steps"), std::string::npos) << out;
  out = test::RunShell(dtrain + " timeline --summary --straggler-candidates 1" + files, &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("HTA's potential stragglers: rank 2): in each of 3 profiler steps, the rank "
                     "whose GPU started"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  rank 2: the latest in 3 of 3 steps"), std::string::npos) << out;
}

}  // namespace
}  // namespace dtrain
