// `dtrain timeline --summary`'s kernels per ATen operator: each kernel launch matched with the
// operator that started last among those spanning it, the launches of one operator run made a
// sequence, counted per operator name and sequence with the mean delays; by hand, and against
// HolisticTraceAnalysis's get_aten_op_kernels_and_delay (tests/kineto/hta_aten_op_kernels.py,
// HTA 0.5.0 run in the test at nanosecond precision) on the recorded H100 ranks and every isolated
// case HTA can read.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/aten_op_launches.h"
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

TEST(AtenOpKernels, HtasLaunchCallNames) {
  for (const char* name : {"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                           "cuLaunchKernelEx", "runFunction"}) {
    EXPECT_TRUE(IsHtaKernelLaunchCall(name)) << name;
  }
  for (const char* name : {"cudaMemcpyAsync", "cudaGraphLaunch", "aten::mm", "LaunchKernel"}) {
    EXPECT_FALSE(IsHtaKernelLaunchCall(name)) << name;
  }
}

// Two runs of aten::linear (an aten::addmm inside, which launches gemm then bias; the launches
// belong to the innermost operator), a launch during a long aten operator on another thread that
// started earlier (the later-starting one on the launching thread wins), a launch outside every
// operator, one whose kernel is not in the trace, and an operator that begins after the cutoff.
TEST(AtenOpKernels, EachLaunchBelongsToTheOperatorThatStartedLastAroundIt) {
  AtenOpLaunchBuilder b;
  int64_t correlation = 1;
  std::map<int64_t, std::pair<std::string, double>> kernels;  // the GPU's, by correlation
  auto launch = [&](double at, const char* kernel, double kernel_at) {
    b.AddLaunch(0, correlation, at, at + 2);
    if (kernel) kernels[correlation] = {kernel, kernel_at};
    ++correlation;
  };
  b.AddOp(0, "aten::to", 0, 1000);  // another thread, spanning everything below
  for (double start : {100.0, 300.0}) {
    b.AddOp(0, "aten::linear", start, start + 100);
    b.AddOp(0, "aten::addmm", start + 10, start + 90);
    if (start == 100) {
      launch(start + 20, "gemm", start + 50);
      launch(start + 40, "bias", start + 80);
    } else {  // listed out of time order: the sequence is still in launch order
      launch(start + 40, "bias", start + 80);
      launch(start + 20, "gemm", start + 50);
    }
  }
  b.AddOp(0, "aten::relu", 500, 520);
  launch(505, nullptr, 0);              // its kernel is not in the trace: left out
  launch(1100, "stray", 1150);          // no operator spans it
  b.AddOp(0, "aten::mul", 1500, 1600);  // after the cutoff
  launch(1510, "mul", 1550);
  launch(700, "copy", 710);  // only aten::to spans it
  b.EndRank(
      0,
      [&](int64_t id, std::string_view* name, double* start) {
        auto it = kernels.find(id);
        if (it == kernels.end()) return false;
        *name = it->second.first;
        *start = it->second.second;
        return true;
      },
      1200);
  const std::vector<RankAtenOpKernels> ranks = b.Finish();
  ASSERT_EQ(ranks.size(), 1u);
  const std::vector<AtenOpKernels>& s = ranks[0].sequences;
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].op, "aten::addmm");  // the most runs first
  EXPECT_EQ(s[0].kernels, "gemm -> bias");
  EXPECT_EQ(s[0].count, 2);
  EXPECT_DOUBLE_EQ(s[0].op_to_launch_us, 10);      // 110 - 100 (its start), the first launch's
  EXPECT_DOUBLE_EQ(s[0].launch_to_kernel_us, 30);  // 150 - 120
  EXPECT_EQ(s[1].op, "aten::to");
  EXPECT_EQ(s[1].kernels, "copy");
  EXPECT_EQ(s[1].count, 1);
  EXPECT_DOUBLE_EQ(s[1].op_to_launch_us, 700);
  const std::string text = FormatAtenOpKernels(ranks);
  EXPECT_NE(text.find("aten::addmm"), std::string::npos) << text;
  EXPECT_NE(text.find("gemm -> bias"), std::string::npos) << text;
}

// HTA's table for every rank of each folder it reads: the same operators and kernel sequences,
// the same counts, the same mean delays (to HTA's rounding to 3 decimals). HTA takes the launches
// in the order the trace file lists them, dtrain in the order they were made: the same on the
// recorded ranks and on the cases that keep the profiler's order; three cases add launches at
// the end of the file that come earlier in time (copies, NCCL kernels, launches queued ahead), and
// there the same runs are compared with their kernels as a set (the first launch, and so the
// delays, differ).
TEST(AtenOpKernels, AgreeWithHolisticTraceAnalysis) {
  RequireFixtures();
  ScratchDir scratch;
  const fs::path dir = scratch.path();
  const std::vector<fs::path> folders = test::FixturesAndCases(dir);
  std::string args;
  for (const fs::path& folder : folders) args += " " + folder.string();
  const json hta = RunHtaScript("hta_aten_op_kernels.py", args);
  ASSERT_FALSE(hta.empty());
  const std::set<std::string> reordered{"full_launch_queue", "memcpy_memset", "nccl_overlap"};
  // A sequence's kernels in name order, for the reordered cases.
  auto as_set = [](const std::string& kernels) {
    std::vector<std::string> names;
    for (size_t at = 0, end;; at = end + 4) {
      end = kernels.find(" -> ", at);
      names.push_back(kernels.substr(at, end == std::string::npos ? end : end - at));
      if (end == std::string::npos) break;
    }
    std::sort(names.begin(), names.end());
    std::string out;
    for (const std::string& name : names) out += name + "\n";
    return out;
  };
  int compared = 0, ranks_compared = 0;
  for (const fs::path& folder : folders) {
    const std::string what = folder.filename().string();
    const std::vector<RankAtenOpKernels> ours =
        test::SummarizeFolder(folder, dir / (what + "-merged.json")).gpu.aten_ops;
    for (const auto& [rank_text, theirs] : hta.at(folder.string()).items()) {
      if (theirs.is_object()) {  // HTA stopped on this trace
        std::cout << what << " rank " << rank_text << ": HTA: " << theirs["error"] << "\n";
        continue;
      }
      const RankAtenOpKernels* mine = nullptr;
      for (const RankAtenOpKernels& r : ours) {
        if (r.rank == std::stoi(rank_text)) mine = &r;
      }
      ASSERT_NE(mine, nullptr) << what << " rank " << rank_text;
      if (reordered.count(what)) {
        std::map<std::pair<std::string, std::string>, int64_t> ours_set, theirs_set;
        for (const AtenOpKernels& s : mine->sequences)
          ours_set[{s.op, as_set(s.kernels)}] += s.count;
        for (const json& row : theirs) {
          theirs_set[{row["op"], as_set(row["kernels"])}] += row["count"].get<int64_t>();
        }
        EXPECT_EQ(ours_set, theirs_set) << what;
        compared += static_cast<int>(theirs.size());
        ++ranks_compared;
        continue;
      }
      std::map<std::pair<std::string, std::string>, const AtenOpKernels*> by_key;
      for (const AtenOpKernels& s : mine->sequences) by_key[{s.op, s.kernels}] = &s;
      EXPECT_EQ(by_key.size(), theirs.size()) << what << " rank " << rank_text;
      for (const json& row : theirs) {
        const std::string key = what + " rank " + rank_text + " " + row["op"].get<std::string>() +
                                ": " + row["kernels"].get<std::string>().substr(0, 60);
        auto it = by_key.find({row["op"], row["kernels"]});
        ASSERT_NE(it, by_key.end()) << key;
        EXPECT_EQ(it->second->count, row["count"].get<int64_t>()) << key;
        EXPECT_NEAR(it->second->op_to_launch_us, row["op_to_launch_us"].get<double>(), 1e-3) << key;
        EXPECT_NEAR(it->second->launch_to_kernel_us, row["launch_to_kernel_us"].get<double>(), 1e-3)
            << key;
        ++compared;
      }
      ++ranks_compared;
    }
  }
  EXPECT_GE(ranks_compared, 11);
  EXPECT_GT(compared, 200);
  std::cout << compared << " sequences as HTA's, on " << ranks_compared << " ranks\n";
}

}  // namespace
}  // namespace dtrain
