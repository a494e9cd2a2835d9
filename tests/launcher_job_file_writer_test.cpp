// JobFileWriter (job.json and the stall reports on a thread of their own) and the logs' writer
// giving the ranks' output to the copies beside the logs, on a plain disk: order, the newest text
// of a file winning, a refusal said once and the write after it. The drive that hangs is in
// launcher_failing_drive_test.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/filtered_output.h"
#include "launcher/job_file_writer.h"
#include "launcher/rank_log.h"
#include "launcher/rank_log_writer.h"
#include "tests/support/files.h"
#include "tests/support/scratch_dirs.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;

TEST(JobFileWriter, WritesEachFileWholeAndTheNewestTextOfIt) {
  const std::string dir = testing::ScratchDirs::Make("file-writer");
  JobFileWriter files;
  for (int i = 1; i <= 200; ++i) {
    files.Replace(dir + "/job.json", "record " + std::to_string(i) + "\n", "the job record", "");
    if (i % 50 == 0) {
      files.Replace(dir + "/stall-" + std::to_string(i / 50) + ".txt", "report\n", "the report",
                    "");
    }
  }
  ASSERT_TRUE(files.Flush(10));
  EXPECT_EQ(ReadFile(dir + "/job.json"), "record 200\n");
  for (int n = 1; n <= 4; ++n) {
    EXPECT_EQ(ReadFile(dir + "/stall-" + std::to_string(n) + ".txt"), "report\n");
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/job.json.tmp"));
  EXPECT_EQ(files.Refused(dir + "/job.json"), "");
  files.MakeFolder(dir + "/errors/attempt-1", "");
  files.Finish();
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/errors/attempt-1"));
  EXPECT_FALSE(files.TakeStuck(0).has_value());
}

TEST(JobFileWriter, SaysARefusalOnceAndTheWriteAfterIt) {
  const std::string dir = testing::ScratchDirs::Make("file-writer-refused");
  const std::string gone = dir + "/gone";  // no such folder yet: every write is refused
  const std::string said = dir + "/stderr.txt";
  // The writer says what it says on stderr: fd 2 goes to `said` meanwhile.
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int to = ::open(said.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_GE(to, 0);
  ::dup2(to, 2);
  ::close(to);
  {
    JobFileWriter files;
    files.Replace(gone + "/job.json", "1\n", "the job record", "the job goes on");
    ASSERT_TRUE(files.Flush(10));
    files.Replace(gone + "/job.json", "2\n", "the job record", "the job goes on");
    ASSERT_TRUE(files.Flush(10));
    EXPECT_THAT(files.Refused(gone + "/job.json"),
                HasSubstr(gone + "/job.json.tmp: cannot write the job record"));
    std::filesystem::create_directories(gone);
    files.Replace(gone + "/job.json", "3\n", "the job record", "the job goes on");
    files.Finish();
    EXPECT_EQ(files.Refused(gone + "/job.json"), "");
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  const std::string text = ReadFile(said);
  EXPECT_EQ(ReadFile(gone + "/job.json"), "3\n");
  EXPECT_THAT(text, HasSubstr("dtrain: warning: " + gone +
                              "/job.json.tmp: cannot write the job record: No such file or "
                              "directory; the job goes on\n"));
  EXPECT_EQ(text.find("warning:"), text.rfind("warning:")) << "said once: " << text;
  EXPECT_THAT(text, HasSubstr("dtrain: the job record " + gone + "/job.json is written again\n"));
}

// The copies take the ranks' output in order from the logs' writer, and not dtrain's own words;
// a rank's end ends its unterminated line.
TEST(RankLogWriter, GivesTheRanksOutputToTheCopies) {
  const std::string dir = testing::ScratchDirs::Make("writer-copies");
  std::map<int, std::unique_ptr<RankLog>> logs;
  for (int rank = 0; rank < 2; ++rank) logs[rank] = std::make_unique<RankLog>(dir, rank);
  {
    RankLogWriter writer(logs);
    writer.AddCopy(FilteredOutputFor(dir, "", "keep", ""));
    for (int i = 0; i < 1000; ++i) {
      const int rank = i % 2;
      writer.Output(rank, OutputStream::kStdout,
                    (i % 3 ? "drop " : "keep ") + std::to_string(i) + "\n", 0);
    }
    writer.Append(0, "dtrain: keep out of the copies\n", 0);
    writer.Output(1, OutputStream::kStdout, "keep the last", 0);
    writer.Finish(1);
    ASSERT_TRUE(writer.Drain(10));
  }
  const std::string filtered = ReadFile(dir + "/filtered_stdout.log");
  std::string expected;
  for (int i = 0; i < 1000; i += 3) {
    expected += "[default" + std::to_string(i % 2) + "]:keep " + std::to_string(i) + "\n";
  }
  expected += "[default1]:keep the last\n";
  EXPECT_EQ(filtered, expected);
  EXPECT_THAT(ReadFile(RankLogPath(dir, 0)), HasSubstr("dtrain: keep out of the copies\n"));
}

}  // namespace
}  // namespace dtrain
