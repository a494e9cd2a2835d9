// `dtrain logs` over jobs run for real: one rank, ranks interleaved in time order, the tail,
// --follow until the job ends, --list, and job names that try to leave the log dir.
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/filtered_output.h"
#include "launcher/log_reader.h"
#include "tests/support/dtrain_process.h"

namespace dtrain {
namespace {

using testing::DtrainProcess;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RunDtrain;
using testing::TempDir;
using testing::WaitFor;

// Rank 0 prints a1, rank 1 then b1 (unterminated, and last in its log), rank 0 then a2; each
// waits for the other's signal file plus 0.3 s, so the lines reach dtrain in that order even on
// a busy machine.
const char kScript[] =
    "cd \"$DTRAIN_LOG_DIR\"; wait_for() { until [ -e $1 ]; do sleep 0.01; done; sleep 0.3; }; "
    "if [ $RANK = 0 ]; then echo a1; touch s1; wait_for s2; echo a2; "
    "else wait_for s1; printf b1; touch s2; fi";

TEST(Logs, InterleavesRanksInTimeOrder) {
  TempDir dir;
  ASSERT_EQ(RunDtrain({"launch", "--nproc-per-node", "2", "--job", "j", "--", "sh", "-c", kScript},
                      dir.path())
                .status,
            0);
  auto all = RunDtrain({"logs"}, dir.path());
  EXPECT_EQ(all.status, 0) << all.err;
  EXPECT_EQ(all.out, "[localhost:0] a1\n[localhost:1] b1\n[localhost:0] a2\n");
  EXPECT_EQ(RunDtrain({"logs", "--job", "j", "--rank", "0"}, dir.path()).out, "a1\na2\n");
  EXPECT_EQ(RunDtrain({"logs", "--rank", "1", "--rank", "0"}, dir.path()).out,
            "[localhost:0] a1\n[localhost:1] b1\n[localhost:0] a2\n");
  EXPECT_EQ(RunDtrain({"logs", "--tail", "2"}, dir.path()).out,
            "[localhost:1] b1\n[localhost:0] a2\n");
  EXPECT_EQ(RunDtrain({"logs", "--rank", "0", "-n", "1"}, dir.path()).out, "a2\n");
  auto bad_rank = RunDtrain({"logs", "--rank", "5"}, dir.path());
  EXPECT_EQ(bad_rank.status, 2);
  EXPECT_THAT(bad_rank.err, HasSubstr("has ranks 0..1"));
}

TEST(Logs, ListsJobsAndRefusesPathsOutsideTheLogDir) {
  TempDir dir;
  ASSERT_EQ(RunDtrain({"launch", "--job", "good", "--", "true"}, dir.path()).status, 0);
  ASSERT_EQ(RunDtrain({"launch", "--job", "bad", "--", "false"}, dir.path()).status, 1);
  auto list = RunDtrain({"logs", "--list"}, dir.path());
  EXPECT_EQ(list.status, 0);
  EXPECT_THAT(list.out, HasSubstr("good"));
  EXPECT_THAT(list.out, HasSubstr("succeeded"));
  EXPECT_THAT(list.out, ::testing::ContainsRegex("bad +failed +1 .* 1  false"));
  for (const char* name : {"../good", "..", "/etc", "good/../../x", ".hidden"}) {
    auto run = RunDtrain({"logs", "--job", name}, dir.path());
    EXPECT_EQ(run.status, 2) << name << ": " << run.err;
  }
  // A symlink planted in the log dir does not lead out of it either.
  ASSERT_EQ(::symlink("/etc", (dir.path() + "/dtrain-logs/evil").c_str()), 0);
  EXPECT_NE(RunDtrain({"logs", "--job", "evil"}, dir.path()).status, 0);
  EXPECT_EQ(RunDtrain({"logs", "--job", "missing"}, dir.path()).status, 1);
  EXPECT_EQ(RunDtrain({"logs", "--log-dir", "/nonexistent"}, dir.path()).status, 1);
}

TEST(Logs, FollowPrintsUntilTheJobEnds) {
  TempDir dir;
  DtrainProcess job({"launch", "--job", "live", "--quiet", "--", "sh", "-c",
                     "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done"},
                    dir.path());
  ASSERT_TRUE(
      WaitFor([&] { return !ReadFile(dir.path() + "/dtrain-logs/live/rank-0.log").empty(); }, 20));
  auto follow = RunDtrain({"logs", "--job", "live", "--rank", "0", "--follow"}, dir.path(), {}, 30);
  EXPECT_EQ(job.Wait(20), 0);
  EXPECT_EQ(follow.status, 0);
  EXPECT_EQ(follow.out, "line 1\nline 2\nline 3\nline 4\nline 5\n");
}

TEST(Logs, LastLinesOfAFile) {
  TempDir dir;
  testing::WriteFile(dir.path() + "/f", "one\ntwo\nthree");
  EXPECT_EQ(LastLines(dir.path() + "/f", 2), (std::vector<std::string>{"two", "three"}));
  EXPECT_EQ(LastLines(dir.path() + "/f", 10).size(), 3u);
  EXPECT_TRUE(LastLines(dir.path() + "/none", 3).empty());
}

}  // namespace
// torchrun's --duplicate-*-filters: lines cut across chunks are judged whole, a last line without
// a newline when its rank ends, each stream on its own; ",," is a comma.
TEST(FilteredOutput, JudgesWholeLinesOfEachRankAndStream) {
  EXPECT_EQ(dtrain::ParseFilterList("apple,a,,b"), (std::vector<std::string>{"apple", "a,b"}));
  EXPECT_EQ(dtrain::ParseFilterList("x"), (std::vector<std::string>{"x"}));
  TempDir dir;
  {
    dtrain::FilteredOutput out(dir.path(), "trainer", {"apple", "a,b"}, {});
    using dtrain::OutputStream;
    out.Output(1, OutputStream::kStdout, "pear\nan ap");
    out.Output(0, OutputStream::kStdout, "apple first\n");
    out.Output(1, OutputStream::kStdout, "ple, cut\na,b\nlast apple");
    out.Output(0, OutputStream::kStderr, "apple on stderr\n");  // stderr has no filters
    out.Finish(1);
    // A rank that never ends its line is judged once the line is past the bound, not held.
    out.Output(2, OutputStream::kStdout, std::string(dtrain::kMaxPartialLine, 'x') + " apple");
    EXPECT_THAT(ReadFile(dir.path() + "/filtered_stdout.log"), HasSubstr("xx apple\n"));
  }
  EXPECT_EQ(ReadFile(dir.path() + "/filtered_stdout.log"),
            "[trainer0]:apple first\n[trainer1]:an apple, cut\n[trainer1]:a,b\n"
            "[trainer1]:last apple\n[trainer2]:" +
                std::string(dtrain::kMaxPartialLine, 'x') + " apple\n");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/filtered_stderr.log"));
}

}  // namespace dtrain
