// `dtrain timeline --summary`'s GPU time by record_function region: the GPU user annotations of
// PyTorch profiler traces summed per name and rank, by hand and against HolisticTraceAnalysis'
// GPU user annotation breakdown (tests/kineto/hta_counters.py, HTA 0.5.0 run in the test) on the
// recorded H100 ranks and the case with GPU annotations of its own, each read as HTA reads it.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/gpu_annotation_breakdown.h"
#include "launcher/timeline/timeline_report.h"
#include "tests/support/kineto_fixtures.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::kFixtures;
using test::MakeCases;
using test::RequireFixtures;
using test::RunHtaScript;
using testing::ScratchDir;

TEST(GpuAnnotations, SummedPerNameByHand) {
  GpuAnnotationBreakdownBuilder b;
  auto region = [&](int rank, std::string_view cat, std::string_view name, double dur) {
    b.Add(KinetoEvent{rank, cat, name, 100, dur, -1, -1, -1});
  };
  region(0, "gpu_user_annotation", "forward", 1);
  region(0, "gpu_user_annotation", "forward", 2);
  region(0, "gpu_user_annotation", "forward", 3);
  region(0, "gpu_user_annotation", "backward", 10);
  region(0, "user_annotation", "forward", 50);  // the CPU's: not the GPU's time
  region(1, "kernel", "gemm", 7);
  const std::vector<RankAnnotations> ranks = b.Finish();
  ASSERT_EQ(ranks.size(), 1u);
  ASSERT_EQ(ranks[0].regions.size(), 2u);
  const AnnotationTime& backward = ranks[0].regions[0];  // most time first
  EXPECT_EQ(backward.name, "backward");
  EXPECT_EQ(backward.std_us, 0);  // one: 0, as HTA
  const AnnotationTime& forward = ranks[0].regions[1];
  EXPECT_EQ(forward.count, 3);
  EXPECT_DOUBLE_EQ(forward.sum_us, 6);
  EXPECT_DOUBLE_EQ(forward.mean_us, 2);
  EXPECT_DOUBLE_EQ(forward.min_us, 1);
  EXPECT_DOUBLE_EQ(forward.max_us, 3);
  EXPECT_DOUBLE_EQ(forward.std_us, 1);  // a sample's
  const std::string text = FormatGpuAnnotations(ranks);
  EXPECT_NE(text.find("forward"), std::string::npos) << text;
}

TEST(GpuAnnotations, AgreeWithHolisticTraceAnalysis) {
  RequireFixtures();
  ScratchDir scratch;
  const fs::path dir = scratch.path();
  const std::vector<std::string> cases = MakeCases((dir / "cases").string());
  ASSERT_FALSE(cases.empty());
  const std::vector<fs::path> folders{kFixtures, dir / "cases" / "gpu_annotations"};
  const fs::path as_read = dir / "as-read";
  std::string args = "--as-read " + as_read.string();
  for (const fs::path& folder : folders) args += " " + folder.string();
  const json hta = RunHtaScript("hta_counters.py", args);
  ASSERT_FALSE(hta.empty());
  int compared = 0;
  for (size_t n = 0; n < folders.size(); ++n) {
    const fs::path read = as_read / std::to_string(n);
    TimelineRequest request;
    for (const char* file : {"rank0.json.gz", "rank1.json.gz"}) {
      if (fs::exists(read / file)) request.inputs.push_back((read / file).string());
    }
    request.output = read.string() + "-merged.json";
    request.summary = true;
    const TimelineReport report = MakeTimeline(request);
    for (const auto& [rank_text, theirs] : hta.at(folders[n].string()).items()) {
      const json& regions = theirs["annotations"];
      const RankAnnotations* ours = nullptr;
      for (const RankAnnotations& r : report.gpu_annotations) {
        if (r.rank == std::stoi(rank_text)) ours = &r;
      }
      ASSERT_NE(ours, nullptr) << "rank " << rank_text;
      EXPECT_EQ(ours->regions.size(), regions.size()) << "rank " << rank_text;
      for (const AnnotationTime& a : ours->regions) {
        const std::string what =
            folders[n].filename().string() + " rank " + rank_text + " " + a.name;
        ASSERT_TRUE(regions.contains(a.name)) << what;
        const json& h = regions[a.name];
        EXPECT_EQ(a.count, h["count"].get<int64_t>()) << what;
        EXPECT_NEAR(a.sum_us, h["sum"].get<double>(), 1e-6) << what;
        EXPECT_NEAR(a.mean_us, h["mean"].get<double>(), 1e-6) << what;
        EXPECT_NEAR(a.min_us, h["min"].get<double>(), 1e-6) << what;
        EXPECT_NEAR(a.max_us, h["max"].get<double>(), 1e-6) << what;
        EXPECT_NEAR(a.std_us, h["std"].get<double>(), 1e-6) << what;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 10);
  std::cout << compared << " regions as HTA's\n";
}

}  // namespace
}  // namespace dtrain
