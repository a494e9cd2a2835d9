// The drive under a job's folder fails or hangs while the job runs: a drive gone (LoopDisk::Fail,
// as an NVMe drive that fell off the bus) under an ext4 that aborts at its next journal commit or
// under one that commits only every minute, and a drive that answers nothing (a loop device over
// a file on a frozen file system). The job goes on; dtrain says what happened within seconds, and
// what the logs lost. Root: disks of the test's own (tests/support/loop_disk.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "launcher/log_reader.h"
#include "launcher/rank_log.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/hanging_drive.h"
#include "tests/support/log_gap.h"
#include "tests/support/loop_disk.h"
#include "tests/support/popen_shell.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/wait_for.h"

namespace dtrain {
namespace {

using testing::ExpectOneGapAccountedFor;
using ::testing::HasSubstr;
using testing::ReadFile;

constexpr const char* kNeedsRoot = testing::LoopDisk::kNeedsRoot;

// How a stuck write says the drive hangs, as a regular expression: in full the first time, briefly
// after another was said (rank_log_outage.h), whichever of the logs' sync, a log's write and
// dtrain's own files got stuck first.
const std::string kDriveHangs =
    "(: the drive under the job's folder hangs \\(see dmesg\\); the job goes on,| either "
    "\\(the drive under the job's folder hangs, as said above\\),)";

// Waits (at most 30 s) until both ranks' scripts touched `flags`/up-0 and up-1.
void WaitForBothRanks(const std::string& flags) {
  testing::WaitFor(
      [&] {
        return std::filesystem::exists(flags + "/up-0") && std::filesystem::exists(flags + "/up-1");
      },
      30);
}

// The drive under the job's folder fails while two ranks print (LoopDisk::Fail, as an NVMe drive
// that fell off the bus). Writes still land in the page cache until ext4 finds out, at its next
// journal commit (5 s by default): from then on it refuses every change, and the ranks print for
// 9 s. The job runs to its end with its own exit status, the console has everything, the outage
// is said once and never said over, and dtrain says what the logs lost and that the job's end
// could not be recorded.
TEST(FailingDrive, AJobGoesOnWhenTheDriveUnderItsFolderFails) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string scratch = testing::ScratchDirs::Make("failed-drive");
  testing::LoopDisk disk(scratch + "/disk", "8M");
  ASSERT_EQ(disk.error(), "");
  const std::string flags = scratch + "/flags";
  std::filesystem::create_directories(flags);
  const std::string script = R"(
F=)" + flags + R"(
line() { printf 'rank %s %s %02d\n' "$RANK" "$1" "$2"; }
for i in 1 2 3; do line before $i; done
touch "$F/up-$RANK"
while [ ! -e "$F/failed" ]; do sleep 0.05; done
for i in $(seq 1 30); do line during $i; sleep 0.3; done
exit 0
)";
  std::ofstream(scratch + "/rank.sh") << script;
  std::thread fail([&] {
    WaitForBothRanks(flags);
    ::usleep(300 * 1000);  // the "before" lines reach the logs
    EXPECT_TRUE(disk.Fail()) << disk.error();
    int status = 0;
    test::RunShell("dd if=/dev/zero of=" + disk.path() + "/probe bs=4k count=1 conv=fsync",
                   &status);
    EXPECT_NE(status, 0) << "the failed drive took a synced write";  // ext4 got EIO
    std::ofstream(flags + "/failed") << "";
  });
  const testing::DtrainRun run =
      testing::RunDtrain({"launch", "--nproc-per-node", "2", "--log-dir", disk.path(), "--job",
                          "gone", "--", "bash", scratch + "/rank.sh"},
                         scratch, {}, 60);
  fail.join();
  EXPECT_EQ(run.status, 0) << run.err;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(run.out, HasSubstr("rank " + std::to_string(rank) + " during 30")) << run.out;
  }
  EXPECT_THAT(run.err, ::testing::ContainsRegex("dtrain: warning: cannot write rank [01]'s log " +
                                                disk.path() +
                                                "/gone/rank-[01].log: (Read-only file system|"
                                                "Input/output error); the job goes on"));
  EXPECT_EQ(run.err.find("warning: cannot write rank"), run.err.rfind("warning: cannot write rank"))
      << "the outage said once: " << run.err;
  EXPECT_EQ(run.err.find("the rank logs are written again"), std::string::npos) << run.err;
  EXPECT_THAT(run.err, HasSubstr("of the ranks' output could not be written to 2 of the logs"));
  EXPECT_THAT(run.err, HasSubstr("dtrain: error: the job's end could not be recorded: "));
  // What the logs kept: the lines before, read back from the page cache.
  EXPECT_THAT(ReadFile(RankLogPath(disk.path() + "/gone", 0)), HasSubstr("rank 0 before 03\n"));
}

// A drive that fails where ext4 commits its journal only every minute (`commit=60`; XFS flushes
// its log every 30 s alike): nothing aborts, the logs' writes go on succeeding into the page
// cache and every writeback fails. The ranks print every 0.1 s; the drive goes away 1.5 s in.
// With the logs' syncs (`--log-sync`, 1 s by default) dtrain says so within seconds, once, and
// at the end how many bytes may not be on the disk and that job.json's end was not kept. Without
// them (`--log-sync 0`, the same job on a disk of its own) nothing is said at all: the test's
// disk hides the failure from every write, and the sync is what finds it.
struct FailedUnderWrites {
  int status = -1;
  std::string err;
  double said_after_s = -1;  // from the failure to the sync's warning; -1: not said
};

FailedUnderWrites RunOnADriveThatFails(const std::string& scratch, const std::string& sync_s) {
  FailedUnderWrites result;
  testing::LoopDisk disk(scratch + "/disk", "8M", "", "", "commit=60");
  EXPECT_EQ(disk.error(), "");
  if (!disk.error().empty()) return result;
  const std::string flags = scratch + "/flags";
  std::filesystem::create_directories(flags);
  std::ofstream(scratch + "/rank.sh") << "touch " << flags << "/up-$RANK\n"
                                      << "i=0; while [ ! -e " << flags << "/stop ] && "
                                      << "[ $i -lt 300 ]; do i=$((i+1)); "
                                      << "printf 'rank %s line %03d\\n' \"$RANK\" $i; "
                                      << "sleep 0.1; done\n";
  testing::DtrainProcess dtrain(
      {"launch", "--nproc-per-node", "2", "--log-dir", disk.path(), "--job", "gone", "--log-sync",
       sync_s, "--", "bash", scratch + "/rank.sh"},
      scratch);
  WaitForBothRanks(flags);
  ::usleep(1500 * 1000);  // a sync of what the logs took so far, on the drive still there
  EXPECT_TRUE(disk.Fail()) << disk.error();
  result.said_after_s =
      testing::WaitForText(dtrain, "failed to keep it", std::chrono::steady_clock::now(), 4);
  std::ofstream(flags + "/stop") << "";
  result.status = dtrain.Wait(60);
  result.err = dtrain.err();
  return result;
}

TEST(FailingDrive, TheLogSyncFindsADriveThatFailedUnderWritesThatStillSucceed) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string scratch = testing::ScratchDirs::Make("failed-under-writes");
  const FailedUnderWrites synced = RunOnADriveThatFails(scratch + "/synced", "1");
  EXPECT_EQ(synced.status, 0) << synced.err;
  const std::string job_dir = scratch + "/synced/disk/mnt/gone";
  EXPECT_THAT(
      synced.err,
      ::testing::ContainsRegex(
          "dtrain: warning: the disk under rank [01]'s log " + job_dir +
          "/rank-[01].log failed to keep it \\(fsync: Input/output error\\): the [1-9][0-9]* "
          "byte\\(s\\) it took in the last [0-9.]+ s may not be on the disk"));
  EXPECT_GE(synced.said_after_s, 0) << "not said within 4 s: " << synced.err;
  EXPECT_LT(synced.said_after_s, 4);
  std::printf("the failure was said %.2f s after the drive went\n", synced.said_after_s);
  EXPECT_EQ(synced.err.find("failed to keep it"), synced.err.rfind("failed to keep it"))
      << "said once: " << synced.err;
  EXPECT_THAT(synced.err,
              ::testing::ContainsRegex(
                  "dtrain: warning: [1-9][0-9]* byte\\(s\\) the rank logs in " + job_dir +
                  " took may not be on the disk: their syncs failed \\(Input/output "
                  "error\\)"));
  EXPECT_THAT(synced.err, HasSubstr("dtrain: error: the job's end may not be kept: the sync of " +
                                    job_dir + "/job.json failed (Input/output error)"));

  const FailedUnderWrites unsynced = RunOnADriveThatFails(scratch + "/unsynced", "0");
  EXPECT_EQ(unsynced.status, 0) << unsynced.err;
  EXPECT_EQ(unsynced.said_after_s, -1);
  EXPECT_EQ(unsynced.err.find("warning:"), std::string::npos)
      << "every write took, and nothing was said: " << unsynced.err;
  EXPECT_EQ(unsynced.err.find("error:"), std::string::npos) << unsynced.err;
}

size_t CountOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A drive that hangs under the job's folder: the job's ext4 disk is a loop device backed by a file
// on another file system, frozen (fsfreeze) 1.5 s in, so the drive takes no write and answers
// none. ext4 then blocks the next write to a log at its next journal commit. The job goes on: the
// ranks print on, the console shows it, and the write that does not return is said after 10 s
// (and the sync of the logs that does not return, as well).
// Rank 0 then floods 80 MiB, past the 64 MiB dtrain holds for the logs. The end waits for the
// drive (the kernel holds the write, and dtrain's end with it); once the drive answers, everything
// held in memory is written: every line the console showed of rank 1 is in its log, and rank 0's
// holds all it wrote but the bytes that found no room, marked and counted.
TEST(FailingDrive, ADriveThatHangsHoldsTheLogsNotTheJob) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string scratch = testing::ScratchDirs::Make("hung-drive");
  testing::HangingDrive disk(scratch);
  ASSERT_EQ(disk.error(), "");
  const std::string flags = scratch + "/flags";
  std::filesystem::create_directories(flags);
  // Rank 0 floods 80 MiB once the hang is said (its output kept whole in flags/all-0 too): more
  // than the 64 MiB held for the logs.
  std::ofstream(scratch + "/rank.sh")
      << "F=" << flags << "\n"
      << "[ \"$RANK\" = 0 ] && exec > >(tee \"$F/all-0\")\n"
      << "touch $F/up-$RANK\n"
      << "i=0; while [ ! -e $F/stop ] && [ $i -lt 600 ]; do i=$((i+1)); "
      << "printf 'rank %s line %03d\\n' \"$RANK\" $i; "
      << "if [ \"$RANK\" = 0 ] && [ -e $F/flood ] && [ ! -e $F/flooded ]; then "
      << "head -c 83886080 /dev/zero | tr '\\0' x | fold -w 99; touch $F/flooded; fi; "
      << "sleep 0.1; done\n";
  testing::DtrainProcess dtrain({"launch", "--nproc-per-node", "2", "--log-dir", disk.path(),
                                 "--job", "hung", "--", "bash", scratch + "/rank.sh"},
                                scratch);
  testing::HangingDrive::AnswerAtEnd answer_at_end{disk};
  WaitForBothRanks(flags);
  ::usleep(1500 * 1000);
  ASSERT_EQ(disk.Hang(), "");
  const double said_after_s =
      testing::WaitForText(dtrain, "a write to rank", std::chrono::steady_clock::now(), 25);
  std::printf("the hung write was said %.2f s after the drive hung\n", said_after_s);
  // The job goes on meanwhile, and rank 0's flood finds no room past 64 MiB.
  const size_t shown = CountOf(dtrain.out(), " line ");
  std::ofstream(flags + "/flood") << "";
  testing::WaitFor([&] { return std::filesystem::exists(flags + "/flooded"); }, 30);
  ::usleep(2000 * 1000);
  EXPECT_GT(CountOf(dtrain.out(), " line "), shown + 20) << "the ranks print on";
  std::ofstream(flags + "/stop") << "";
  ::usleep(1500 * 1000);
  EXPECT_TRUE(dtrain.running()) << "its end waits for the drive: " << dtrain.err();
  disk.Answer();
  EXPECT_EQ(dtrain.Wait(30), 0) << dtrain.err();
  const std::string err = dtrain.err();
  EXPECT_GE(said_after_s, 9.5) << err;
  EXPECT_LT(said_after_s, 20) << err;  // the write blocks at ext4's next commit (<= 5 s)
  EXPECT_THAT(err, ::testing::ContainsRegex(
                       "dtrain: warning: a write to rank [01]'s log " + disk.path() +
                       "/hung/rank-[01].log has not returned in 1[0-9] s" + kDriveHangs +
                       " and the ranks' output is held in memory until the drive answers"));
  EXPECT_EQ(CountOf(err, "held in memory until the drive answers"), 1u) << "said once: " << err;
  EXPECT_EQ(CountOf(err, "the drive under the job's folder hangs (see dmesg)"), 1u)
      << "the logs' sync and a log's write both got stuck; the drive's hang is said in full once: "
      << err;
  EXPECT_THAT(err, HasSubstr("dtrain: the drive under the job's folder answers again"));
  // Everything the console showed of rank 1 is in its log, written once the drive answered.
  const std::string out = dtrain.out();
  const std::string log1 = ReadFile(RankLogPath(disk.path() + "/hung", 1));
  EXPECT_GT(CountOf(log1, "rank 1 line "), 50u) << log1;
  EXPECT_EQ(CountOf(log1, "rank 1 line "), CountOf(out, "rank 1 line ")) << log1;
  // Rank 0's log holds what it wrote but for the bytes that found no room, marked where.
  EXPECT_THAT(err, ::testing::ContainsRegex(
                       "dtrain: warning: cannot write rank 0's log [^ ]*/hung/rank-0.log: dtrain "
                       "held 64 MiB of output in memory for a drive that did not answer, and had "
                       "no room for it; the job goes on"));
  EXPECT_THAT(err, HasSubstr("dtrain: the rank logs are written again; "));
  EXPECT_THAT(err, HasSubstr("of the ranks' output could not be written to 1 of the logs"));
  ExpectOneGapAccountedFor(ReadFile(RankLogPath(disk.path() + "/hung", 0)),
                           ReadFile(flags + "/all-0"));
}

// An event while the drive under the job's folder hangs: the ranks go silent (a stall) 1 s after
// the hung write to a log was said, so that ext4's journal is stuck by then. The stall report, the
// stop, the job's record, the restart's folder and the restart do not wait for the drive: the
// second attempt's ranks print on the console while the drive still hangs, the report's write
// that does not return is said, and the record and the report are written once the drive answers.
// The copies of the ranks' lines (--duplicate-stdout-filters) are written as the logs are.
TEST(FailingDrive, AnEventDuringAHangDoesNotWaitForTheDrive) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string scratch = testing::ScratchDirs::Make("hung-event");
  testing::HangingDrive disk(scratch);
  ASSERT_EQ(disk.error(), "");
  const std::string flags = scratch + "/flags";
  std::filesystem::create_directories(flags);
  // The first attempt prints until flags/silent, then prints nothing; the second prints until
  // flags/done.
  std::ofstream(scratch + "/rank.sh")
      << "F=" << flags << "\n"
      << "touch $F/up-$RANK\n"
      << "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then\n"
      << "  i=0; while [ ! -e $F/silent ]; do i=$((i+1)); "
      << "printf 'rank %s line %03d\\n' \"$RANK\" $i; sleep 0.1; done; sleep 600\n"
      << "fi\n"
      << "i=0; while [ ! -e $F/done ]; do i=$((i+1)); "
      << "printf 'rank %s again %03d\\n' \"$RANK\" $i; sleep 0.1; done\n";
  testing::DtrainProcess dtrain({"launch",    "--nproc-per-node",
                                 "2",         "--log-dir",
                                 disk.path(), "--job",
                                 "event",     "--stall-timeout",
                                 "3",         "--on-stall",
                                 "stop",      "--max-restarts",
                                 "1",         "--restart-health-check",
                                 "off",       "--grace-period",
                                 "1",         "--duplicate-stdout-filters",
                                 "rank",      "--",
                                 "bash",      scratch + "/rank.sh"},
                                scratch);
  testing::HangingDrive::AnswerAtEnd answer_at_end{disk};
  WaitForBothRanks(flags);
  ::usleep(1500 * 1000);
  ASSERT_EQ(disk.Hang(), "");
  const auto hung = std::chrono::steady_clock::now();
  testing::WaitForText(dtrain, "a write to rank", hung, 25);
  ::usleep(1000 * 1000);
  std::ofstream(flags + "/silent") << "";
  const auto silent = std::chrono::steady_clock::now();
  ASSERT_TRUE(testing::WaitFor([&] { return CountOf(dtrain.out(), " again 010") == 2; }, 30))
      << "the second attempt runs while the drive hangs: " << dtrain.err();
  std::printf("the second attempt printed its 10th line %.2f s after the ranks went silent\n",
              testing::Since(silent));
  // The first of dtrain's own files written after the hang: the stall report.
  const double report_said_s =
      testing::WaitForText(dtrain, "stall-1.txt has not returned", silent, 30);
  std::printf("the stuck write of the stall report was said %.2f s after the ranks went silent\n",
              report_said_s);
  EXPECT_GE(report_said_s, 0) << dtrain.err();
  std::ofstream(flags + "/done") << "";
  ::usleep(1500 * 1000);
  EXPECT_TRUE(dtrain.running()) << "its end waits for the drive: " << dtrain.err();
  disk.Answer();
  EXPECT_EQ(dtrain.Wait(30), 0) << dtrain.err();
  const std::string err = dtrain.err();
  const std::string job_dir = disk.path() + "/event";
  EXPECT_THAT(err, HasSubstr("dtrain: the stall report waits in memory for " + job_dir +
                             "/stall-1.txt: a write to the job's folder has not returned in 0.5 s "
                             "(its drive hangs?); it is written once the drive answers"));
  EXPECT_THAT(err, HasSubstr("dtrain: restarting job event (restart 1 of 1)"));
  EXPECT_THAT(err,
              ::testing::ContainsRegex("dtrain: warning: a write to " + job_dir +
                                       "/stall-1.txt has not returned in 1[0-9] s" + kDriveHangs +
                                       " and dtrain writes the file once the drive answers"));
  EXPECT_THAT(err, HasSubstr("dtrain: the drive under the job's folder answers again: a write to " +
                             job_dir + "/stall-1.txt took "));
  EXPECT_EQ(err.find("error:"), std::string::npos) << err;
  // Written once the drive answered: the record of both attempts and the stall, the report, every
  // line in the logs and the filtered copy.
  const std::string record = ReadFile(job_dir + "/job.json");
  EXPECT_THAT(record, HasSubstr("\"status\": \"succeeded\""));
  EXPECT_THAT(record, HasSubstr("\"restarts\": 1"));
  EXPECT_THAT(record, HasSubstr("\"kind\": \"stall\""));
  EXPECT_THAT(ReadFile(job_dir + "/stall-1.txt"), HasSubstr("rank"));
  const std::string out = dtrain.out();
  const std::string filtered = ReadFile(job_dir + "/filtered_stdout.log");
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = ReadFile(RankLogPath(job_dir, rank));
    const std::string line = fmt::format("rank {} line ", rank);
    const std::string again = fmt::format("rank {} again ", rank);
    EXPECT_EQ(CountOf(log, line), CountOf(out, line)) << log;
    EXPECT_EQ(CountOf(log, again), CountOf(out, again)) << log;
    EXPECT_EQ(CountOf(filtered, line), CountOf(out, line));
    EXPECT_EQ(CountOf(filtered, again), CountOf(out, again)) << filtered;
  }
}

}  // namespace
}  // namespace dtrain
