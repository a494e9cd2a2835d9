// The disk holding a job's folder fills up while the job runs (the rank logs of a long run, a
// checkpoint beside them): the job goes on, what the disk refused is counted and marked in each
// log, job.json is written whole once the disk takes it again, and nothing starts on a disk too
// full for the job's record. A real full disk of the test's own (root): an ext4 file system
// (tests/support/loop_disk.h) or a tmpfs (tests/support/tmpfs_disk.h), filled by a file and freed
// again. A drive that fails or hangs: launcher_failing_drive_test.cpp.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/filtered_output.h"
#include "launcher/log_reader.h"
#include "launcher/rank_log.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/fill_disk.h"
#include "tests/support/log_gap.h"
#include "tests/support/loop_disk.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/tmpfs_disk.h"

namespace dtrain {
namespace {

using testing::ExpectOneGapAccountedFor;
using ::testing::HasSubstr;
using testing::ReadFile;

constexpr const char* kNeedsRoot = testing::LoopDisk::kNeedsRoot;

TEST(FullDisk, ARankLogLosesWhatTheDiskRefusesAndMarksTheGap) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  testing::LoopDisk disk(testing::ScratchDirs::Make("full-log"), "8M");
  ASSERT_EQ(disk.error(), "");
  std::string all;
  {
    RankLog log(disk.path(), 3);
    const auto append = [&](const std::string& bytes, int64_t at) {
      log.Append(bytes, at);
      all += bytes;
    };
    append("before\n", 1000);
    EXPECT_EQ(log.failing(), "");
    testing::FillDisk(disk.path());
    // More than the slack of the log's last block: some of it is refused.
    const std::string line = std::string(500, 'x') + "\n";
    for (int i = 0; i < 20; ++i) append(line, 2000 + i);
    EXPECT_EQ(log.failing(), "No space left on device");
    EXPECT_GT(log.lost_bytes(), 0u);
    const uint64_t lost = log.lost_bytes();
    std::filesystem::remove(disk.path() + "/filler");
    append("after\n", 3000);
    EXPECT_EQ(log.failing(), "");
    EXPECT_EQ(log.lost_bytes(), lost);
    EXPECT_EQ(log.gap_bytes(), 0u);
  }
  const std::string text = ReadFile(RankLogPath(disk.path(), 3));
  ExpectOneGapAccountedFor(text, all);
  EXPECT_THAT(text, HasSubstr("lost here: No space left on device ---\nafter\n"));
  // The index still times every line: the mark and the line after it arrived at 3000.
  RankLogCursor cursor(disk.path(), 3);
  LogLineSpan span;
  int64_t after_us = -1;
  while (cursor.Peek(true, span)) {
    if (text.compare(span.begin, 6, "after\n") == 0) after_us = span.time_us;
    cursor.Take();
  }
  EXPECT_EQ(after_us, 3000);
}

// torchrun's --duplicate-stdout-filters copy on a disk that fills up: the lines the disk refused
// are lost and counted, stderr says when and how many, and every line the file holds is a whole
// "[role rank]:" line in order but for at most one the disk cut.
TEST(FullDisk, FilteredOutputLosesTheLinesTheDiskRefusesAndSaysHowMany) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string mount = testing::ScratchDirs::Make("full-filtered") + "/disk";
  const testing::TmpfsDisk disk(mount, "256k");
  ASSERT_EQ(disk.error(), "");
  const std::string pad(300, 'p');
  int n = 0;
  uint64_t lost = 0;
  ::testing::internal::CaptureStderr();
  {
    FilteredOutput out(mount, "trainer", {"loss"}, {});
    const auto print = [&](int lines) {
      for (int i = 0; i < lines; ++i) {
        out.Output(1, OutputStream::kStdout, "loss " + std::to_string(n++) + " " + pad + "\n");
        out.Output(1, OutputStream::kStdout, "not picked\n");
      }
    };
    print(5);
    disk.Fill();
    print(40);  // 12 KiB: more than the last page's room
    lost = out.lost_lines(OutputStream::kStdout);
    EXPECT_GT(lost, 0u);
    std::filesystem::remove(mount + "/filler");
    print(5);
    EXPECT_EQ(out.lost_lines(OutputStream::kStdout), lost);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string path = mount + "/filtered_stdout.log";
  EXPECT_THAT(err, HasSubstr("dtrain: warning: " + path +
                             ": cannot write: No space left on device; the job goes on"));
  EXPECT_THAT(err, HasSubstr("dtrain: " + path + " is written again; " + std::to_string(lost) +
                             " line(s) lost\n"));
  std::istringstream text(ReadFile(path));
  static const std::regex whole(R"(\[trainer1\]:loss (\d+) p{300})");
  std::string line;
  int whole_lines = 0, cut_lines = 0, last = -1;
  while (std::getline(text, line)) {
    std::smatch m;
    if (!std::regex_match(line, m, whole)) {
      ++cut_lines;
      continue;
    }
    const int k = std::stoi(m[1].str());
    EXPECT_GT(k, last) << line;
    last = k;
    ++whole_lines;
  }
  EXPECT_LE(cut_lines, 1);
  EXPECT_EQ(static_cast<uint64_t>(whole_lines) + lost, 50u);
  EXPECT_EQ(last, 49);  // the lines after the disk was freed are there
}

// Two ranks print, fill the disk under their logs (rank 0), print while it is full and after it
// is freed. The job succeeds; each log accounts for every byte; dtrain said the outage and its
// end once each, and job.json records the end.
TEST(FullDisk, AJobGoesOnWhileItsFolderIsFullAndTheLogsMarkWhatWasLost) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string scratch = testing::ScratchDirs::Make("full-job");
  testing::LoopDisk disk(scratch + "/disk", "8M");
  ASSERT_EQ(disk.error(), "");
  const std::string flags = scratch + "/flags";
  std::filesystem::create_directories(flags);
  // Each flag file says a rank got that far; the ranks take turns through them.
  const std::string script = R"(
set -e
F=)" + flags + R"(
wait_for() { while [ ! -e "$F/$1" ]; do sleep 0.05; done; }
line() { printf 'rank %s %s %02d %0300d\n' "$RANK" "$1" "$2" 0; }
for i in 1 2 3; do line before $i; done
sleep 0.5
if [ "$RANK" = 0 ]; then
  dd if=/dev/zero of=)" + disk.path() +
                             R"(/filler bs=64k 2>/dev/null || true
  touch "$F/full"
fi
wait_for full
for i in $(seq 1 30); do line during $i; done
touch "$F/printed-$RANK"
if [ "$RANK" = 0 ]; then
  wait_for printed-1; sleep 1
  rm )" + disk.path() + R"(/filler
  touch "$F/freed"
fi
wait_for freed
sleep 0.2
for i in 1 2 3; do line after $i; done
)";
  std::ofstream(scratch + "/rank.sh") << script;
  const testing::DtrainRun run =
      testing::RunDtrain({"launch", "--nproc-per-node", "2", "--log-dir", disk.path(), "--job",
                          "full", "--quiet", "--", "bash", scratch + "/rank.sh"},
                         scratch, {}, 60);
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("'s log " + disk.path() + "/full/rank-"));
  EXPECT_THAT(run.err, HasSubstr(".log: No space left on device; the job goes on"));
  EXPECT_THAT(run.err, HasSubstr("dtrain: the rank logs are written again; "));
  EXPECT_THAT(run.err, HasSubstr("byte(s) of output were lost from 2 log(s)"));
  EXPECT_THAT(run.err, HasSubstr("of the ranks' output could not be written to 2 of the logs"));
  EXPECT_EQ(run.err.find("warning: cannot write rank"), run.err.rfind("warning: cannot write rank"))
      << "the outage said once: " << run.err;
  const auto line = [](int rank, const char* what, int i) {
    char text[400];
    std::snprintf(text, sizeof(text), "rank %d %s %02d %0300d\n", rank, what, i, 0);
    return std::string(text);
  };
  for (int rank = 0; rank < 2; ++rank) {
    std::string all;
    for (int i = 1; i <= 3; ++i) all += line(rank, "before", i);
    for (int i = 1; i <= 30; ++i) all += line(rank, "during", i);
    for (int i = 1; i <= 3; ++i) all += line(rank, "after", i);
    SCOPED_TRACE("rank " + std::to_string(rank));
    ExpectOneGapAccountedFor(ReadFile(RankLogPath(disk.path() + "/full", rank)), all);
  }
  const auto record = nlohmann::json::parse(ReadFile(disk.path() + "/full/job.json"));
  EXPECT_EQ(record["status"], "succeeded");
  EXPECT_FALSE(std::filesystem::exists(disk.path() + "/full/job.json.tmp"));
}

// A disk too full for the job's record: nothing starts, and the error says where and what to do.
TEST(FullDisk, NothingStartsOnADiskTooFullForTheJobsRecord) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string scratch = testing::ScratchDirs::Make("full-start");
  const std::string mount = scratch + "/disk";
  const testing::TmpfsDisk disk(mount, "1m");
  ASSERT_EQ(disk.error(), "");
  disk.Fill();
  const testing::DtrainRun run = testing::RunDtrain(
      {"launch", "--log-dir", mount, "--job", "full", "--", "touch", scratch + "/started"}, scratch,
      {}, 60);
  EXPECT_EQ(run.status, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr(mount + "/full/job.json.tmp: cannot write the job record: No "
                                         "space left on device; nothing was started"));
  EXPECT_FALSE(std::filesystem::exists(scratch + "/started"));
}

// The disk fills up and stays full to the job's end: the job's exit status stands, dtrain says
// the end could not be recorded, and `dtrain status` calls the job, still running by its
// job.json, lost.
TEST(FullDisk, AJobWhoseEndCouldNotBeRecordedIsLost) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string scratch = testing::ScratchDirs::Make("full-end");
  const std::string mount = scratch + "/disk";
  const testing::TmpfsDisk disk(mount, "1m");
  ASSERT_EQ(disk.error(), "");
  const testing::DtrainRun run =
      testing::RunDtrain({"launch", "--log-dir", mount, "--job", "full", "--", "sh", "-c",
                          "echo up; sleep 0.3; dd if=/dev/zero of=" + mount +
                              "/filler bs=64k 2>/dev/null; echo filled; exit 3"},
                         scratch, {}, 60);
  EXPECT_EQ(run.status, 3) << run.err;
  EXPECT_THAT(run.err, HasSubstr("dtrain: error: the job's end could not be recorded: " + mount +
                                 "/full/job.json.tmp: cannot write the job record: No space "
                                 "left on device"));
  const auto record = nlohmann::json::parse(ReadFile(mount + "/full/job.json"));
  EXPECT_EQ(record["status"], "running");
  const testing::DtrainRun status =
      testing::RunDtrain({"status", "--log-dir", mount, "--job", "full"}, scratch);
  EXPECT_THAT(status.out, HasSubstr("job full: lost (local)")) << status.out << status.err;
}

}  // namespace
}  // namespace dtrain
