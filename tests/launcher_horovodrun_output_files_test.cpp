// horovodrun's --output-filename: the folders' names as horovodrun pads them, lines cut at \n or
// \r with the terminator kept, a line cut across pieces written whole, the last unterminated
// piece when the rank ends, empty files for a rank that wrote nothing, and a later attempt's
// output after an earlier one's. (horovodrun itself writes the same files in
// HorovodLaunch.OutputFilenameWritesWhatHorovodrunWrites.)
#include <filesystem>
#include <regex>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/error.h"
#include "launcher/horovodrun_output_files.h"
#include "tests/support/files.h"

namespace dtrain {
namespace {

using testing::ReadFile;
using testing::TempDir;

TEST(HorovodrunOutputFiles, RankFoldersArePaddedToTheLastRanksDigits) {
  EXPECT_EQ(HorovodrunOutputFiles::RankFolder(0, 1), "rank.0");
  EXPECT_EQ(HorovodrunOutputFiles::RankFolder(1, 2), "rank.1");
  EXPECT_EQ(HorovodrunOutputFiles::RankFolder(7, 10), "rank.7");
  EXPECT_EQ(HorovodrunOutputFiles::RankFolder(7, 11), "rank.07");
  EXPECT_EQ(HorovodrunOutputFiles::RankFolder(7, 12), "rank.07");
  EXPECT_EQ(HorovodrunOutputFiles::RankFolder(99, 101), "rank.099");
}

TEST(HorovodrunOutputFiles, EachStreamsLinesAfterTheRankAndStream) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  {
    HorovodrunOutputFiles files(out, 2, false);
    files.Output(1, OutputStream::kStdout, "epoch 1\nprogr");
    files.Output(0, OutputStream::kStderr, "warn\n");
    files.Output(1, OutputStream::kStdout, "ess 10%\rprogress 20%\r\nlast");
    files.Finish(1);
    files.Finish(0);
    // A restart: the same rank's output goes after what it wrote before.
    files.Output(1, OutputStream::kStdout, "again\n");
  }
  EXPECT_EQ(ReadFile(out + "/rank.1/stdout"),
            "[1]<stdout>:epoch 1\n[1]<stdout>:progress 10%\r[1]<stdout>:progress 20%\r"
            "[1]<stdout>:\n[1]<stdout>:last[1]<stdout>:again\n");
  EXPECT_EQ(ReadFile(out + "/rank.1/stderr"), "");
  EXPECT_EQ(ReadFile(out + "/rank.0/stderr"), "[0]<stderr>:warn\n");
  EXPECT_TRUE(std::filesystem::exists(out + "/rank.0/stdout"));
  EXPECT_EQ(ReadFile(out + "/rank.0/stdout"), "");
}

TEST(HorovodrunOutputFiles, TimestampsComeFirstAsHorovodrunWritesThem) {
  TempDir dir;
  {
    HorovodrunOutputFiles files(dir.path(), 1, true);
    files.Output(0, OutputStream::kStdout, "hi\n");
  }
  const std::string text = ReadFile(dir.path() + "/rank.0/stdout");
  // time.asctime(): "Fri Nov  7 15:14:06 2026"
  EXPECT_TRUE(std::regex_match(
      text, std::regex("[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} "
                       "[0-9]{4}\\[0\\]<stdout>:hi\n")))
      << text;
}

// A rank's file that cannot be written is said once and left out; the job and the other ranks
// go on.
TEST(HorovodrunOutputFiles, ARankFileThatCannotBeWrittenIsLeftOut) {
  TempDir dir;
  testing::WriteFile(dir.path() + "/rank.1", "in the way");
  {
    HorovodrunOutputFiles files(dir.path(), 2, false);
    files.Output(1, OutputStream::kStdout, "lost\n");
    files.Output(0, OutputStream::kStdout, "kept\n");
    files.Output(1, OutputStream::kStdout, "lost too\n");
    files.Finish(1);
  }
  EXPECT_EQ(ReadFile(dir.path() + "/rank.0/stdout"), "[0]<stdout>:kept\n");
  EXPECT_EQ(ReadFile(dir.path() + "/rank.1"), "in the way");
}

TEST(HorovodrunOutputFiles, AFolderThatCannotBeMadeIsNamed) {
  TempDir dir;
  const std::string file = dir.path() + "/plain";
  testing::WriteFile(file, "x");
  try {
    HorovodrunOutputFiles files(file + "/out", 2, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--output-filename " + file +
                                               "/out: cannot make "
                                               "the folder"));
  }
}

}  // namespace
}  // namespace dtrain
