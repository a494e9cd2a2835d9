// `dtrain timeline` as a user runs it: the real binary on a log folder holding traces written by
// the real writer in separate processes.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/job_record.h"
#include "tests/support/test_paths.h"
#include "tests/support/timeline_test_files.h"

namespace dtrain {
namespace {

using testing::ReadFile;
using testing::ScratchDir;
using testing::WriteFile;

struct CommandResult {
  int status;
  std::string out;  // stdout and stderr
};

CommandResult Dtrain(const std::string& args) {
  std::string command = std::string(DTRAIN_BINARY_DIR) + "/dtrain timeline " + args + " 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  CommandResult result{-1, {}};
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A log folder with one job of two ranks; `latest` points at it.
std::string MakeJob(const ScratchDir& dir, const std::string& job) {
  std::string logs = dir / "logs";
  std::filesystem::create_directories(logs + "/" + job + "/timeline");
  testing::WriteRankTrace(logs + "/" + job + "/timeline/rank-0.json", 0, "node-a", 0, 5);
  testing::WriteRankTrace(logs + "/" + job + "/timeline/rank-1.json", 1, "node-b", 120, 5);
  PointLatestAt(logs, job);
  return logs;
}

TEST(TimelineCommand, MergesTheNewestJobAndSummarises) {
  ScratchDir dir;
  std::string logs = MakeJob(dir, "job-1");
  CommandResult r = Dtrain("--log-dir " + logs + " --summary");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("merged 2 ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("slowest ranks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not overlapped with compute"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fusion.0"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("warning"), std::string::npos) << r.out;
  nlohmann::json merged = nlohmann::json::parse(ReadFile(logs + "/job-1/timeline.json"));
  EXPECT_GT(merged.size(), 100u);
  std::string svg = ReadFile(logs + "/job-1/timeline-steps.svg");
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(TimelineCommand, TruncatedRankWarnsAndStillSucceeds) {
  ScratchDir dir;
  std::string logs = MakeJob(dir, "job-2");
  std::string rank1 = logs + "/job-2/timeline/rank-1.json";
  // Cut two thirds in, inside a record (a cut between records looks like a writer that never
  // closed its array, which Horovod's older writers do, and is no truncation).
  const std::string text = ReadFile(rank1);
  const size_t inside = text.find("\"ts\"", text.size() * 2 / 3);
  ASSERT_NE(inside, std::string::npos);
  std::filesystem::resize_file(rank1, inside + 3);
  CommandResult r = Dtrain("--log-dir " + logs + " --job job-2 -o " + (dir / "out.json"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("warning: rank 1: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cut short"), std::string::npos) << r.out;
  EXPECT_NO_THROW(nlohmann::json::parse(ReadFile(dir / "out.json")));
}

TEST(TimelineCommand, MergesFilesGivenByHand) {
  ScratchDir dir;
  testing::WriteRankTrace(dir / "a.json", 0, "h", 0, 2);
  CommandResult r = Dtrain("-o " + (dir / "m.json") + " " + (dir / "a.json"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(std::filesystem::exists(dir / "m.json"));
}

TEST(TimelineCommand, ExplainsMissingJobsAndTraces) {
  ScratchDir dir;
  std::string logs = MakeJob(dir, "job-3");
  CommandResult r = Dtrain("--log-dir " + logs + " --job no-such-job");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("no-such-job"), std::string::npos) << r.out;
  std::filesystem::create_directories(logs + "/job-4");
  r = Dtrain("--log-dir " + logs + " --job job-4");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--timeline"), std::string::npos) << r.out;
  WriteFile(dir / "not-a-trace.json", "{}");
  r = Dtrain(dir / "not-a-trace.json");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("not a Chrome trace-event array"), std::string::npos) << r.out;
  r = Dtrain("--job job-3 " + (dir / "not-a-trace.json"));
  EXPECT_EQ(r.status, 2) << r.out;
  r = Dtrain("-c cluster.yaml " + (dir / "not-a-trace.json"));  // -c is for fetching a job's
  EXPECT_EQ(r.status, 2) << r.out;
}

}  // namespace
}  // namespace dtrain
