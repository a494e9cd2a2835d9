// The disk holding a job's folder fills up while the job runs (the rank logs of a long run, a
// checkpoint beside them), or its drive fails: the job goes on, what the disk refused is counted
// and marked in each log, job.json is written whole once the disk takes it again, and nothing
// starts on a disk too full for the job's record. A real full disk of the test's own (root): an
// ext4 file system (tests/support/loop_disk.h) or a tmpfs (tests/support/tmpfs_disk.h), filled by a
// file and freed again, or the ext4 one's drive taken away (LoopDisk::Fail).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "launcher/filtered_output.h"
#include "launcher/log_reader.h"
#include "launcher/rank_log.h"
#include "tests/support/dtrain_process.h"
#include "tests/support/fill_disk.h"
#include "tests/support/loop_disk.h"
#include "tests/support/popen_shell.h"
#include "tests/support/scratch_dirs.h"
#include "tests/support/tmpfs_disk.h"

namespace dtrain {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;

constexpr char kNeedsRoot[] = "needs root (a loop device, a mount)";

// What the rank wrote (`all`) is its log with the one gap mark in it ("--- dtrain: N byte(s) of
// this rank's output lost here: WHY ---") taken out, and exactly N bytes at the mark: what the
// disk took before the outage, then what it took after.
void ExpectOneGapAccountedFor(const std::string& log, const std::string& all) {
  static const std::regex mark(
      R"(--- dtrain: (\d+) byte\(s\) of this rank's output lost here: [^\n]* ---\n)");
  std::smatch found;
  ASSERT_TRUE(std::regex_search(log, found, mark)) << log;
  const uint64_t lost = std::stoull(found[1].str());
  std::string before = found.prefix().str();
  const std::string after = found.suffix().str();
  EXPECT_EQ(after.find("--- dtrain:"), std::string::npos) << "one gap: " << log;
  EXPECT_GT(lost, 0u);
  // A log cut mid-line gets a newline before the mark; it is not the rank's.
  if (all.compare(0, before.size(), before) != 0 && !before.empty() && before.back() == '\n') {
    before.pop_back();
  }
  EXPECT_EQ(all.substr(0, before.size()), before) << log;
  ASSERT_EQ(before.size() + lost + after.size(), all.size()) << log;
  EXPECT_EQ(all.substr(all.size() - after.size()), after) << log;
}

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

// The drive under the job's folder fails while two ranks print (LoopDisk::Fail, as an NVMe drive
// that fell off the bus). Writes still land in the page cache until ext4 finds out, at its next
// journal commit (5 s by default): from then on it refuses every change, and the ranks print for
// 9 s. The job runs to its end with its own exit status, the console has everything, the outage
// is said once and never said over, and dtrain says what the logs lost and that the job's end
// could not be recorded.
TEST(FullDisk, AJobGoesOnWhenTheDriveUnderItsFolderFails) {
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
    for (int i = 0; i < 600; ++i) {
      if (std::filesystem::exists(flags + "/up-0") && std::filesystem::exists(flags + "/up-1"))
        break;
      ::usleep(50 * 1000);
    }
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
  for (int i = 0; i < 600; ++i) {
    if (std::filesystem::exists(flags + "/up-0") && std::filesystem::exists(flags + "/up-1")) break;
    ::usleep(50 * 1000);
  }
  ::usleep(1500 * 1000);  // a sync of what the logs took so far, on the drive still there
  EXPECT_TRUE(disk.Fail()) << disk.error();
  const auto failed = std::chrono::steady_clock::now();
  for (;;) {
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - failed).count();
    if (dtrain.err().find("failed to keep it") != std::string::npos) {
      result.said_after_s = s;
      break;
    }
    if (s > 4 || !dtrain.running()) break;
    ::usleep(50 * 1000);
  }
  std::ofstream(flags + "/stop") << "";
  result.status = dtrain.Wait(60);
  result.err = dtrain.err();
  return result;
}

TEST(FullDisk, TheLogSyncFindsADriveThatFailedUnderWritesThatStillSucceed) {
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

// A drive that hangs under the job's folder: the job's ext4 disk is a loop device backed by a file
// on another file system, frozen (fsfreeze) 1.5 s in, so the drive takes no write and answers
// none. ext4 then blocks the next write to a log at its next journal commit. The job goes on: the
// ranks print on, the console shows it, and the write that does not return is said after 10 s
// (and the sync of the logs that does not return, as well).
// Rank 0 then floods 80 MiB, past the 64 MiB dtrain holds for the logs. The end waits for the
// drive (the kernel holds the write, and dtrain's end with it); once the drive answers, everything
// held in memory is written: every line the console showed of rank 1 is in its log, and rank 0's
// holds all it wrote but the bytes that found no room, marked and counted.
size_t CountOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(FullDisk, ADriveThatHangsHoldsTheLogsNotTheJob) {
  if (::geteuid() != 0) GTEST_SKIP() << kNeedsRoot;
  const std::string scratch = testing::ScratchDirs::Make("hung-drive");
  testing::LoopDisk lower(scratch + "/lower", "512M");
  ASSERT_EQ(lower.error(), "");
  testing::LoopDisk disk(lower.path() + "/upper", "256M");
  ASSERT_EQ(disk.error(), "");
  const auto thaw = [path = lower.path()] {
    int status = 0;
    test::RunShell("fsfreeze -u " + path + " 2>/dev/null", &status);
  };
  struct ThawAtEnd {
    std::function<void()> thaw;
    ~ThawAtEnd() { thaw(); }
  } thaw_at_end{thaw};
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
  for (int i = 0; i < 600; ++i) {
    if (std::filesystem::exists(flags + "/up-0") && std::filesystem::exists(flags + "/up-1")) break;
    ::usleep(50 * 1000);
  }
  ::usleep(1500 * 1000);
  int status = 0;
  const std::string frozen = test::RunShell("fsfreeze -f " + lower.path() + " 2>&1", &status);
  ASSERT_EQ(status, 0) << frozen;
  const auto hung = std::chrono::steady_clock::now();
  const auto since = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - hung).count();
  };
  double said_after_s = -1;
  while (since() < 25 && dtrain.running()) {
    if (dtrain.err().find("a write to rank") != std::string::npos) {
      said_after_s = since();
      break;
    }
    ::usleep(50 * 1000);
  }
  std::printf("the hung write was said %.2f s after the drive hung\n", said_after_s);
  // The job goes on meanwhile, and rank 0's flood finds no room past 64 MiB.
  const size_t shown = CountOf(dtrain.out(), " line ");
  std::ofstream(flags + "/flood") << "";
  for (int i = 0; i < 600 && !std::filesystem::exists(flags + "/flooded"); ++i) ::usleep(50 * 1000);
  ::usleep(2000 * 1000);
  EXPECT_GT(CountOf(dtrain.out(), " line "), shown + 20) << "the ranks print on";
  std::ofstream(flags + "/stop") << "";
  ::usleep(1500 * 1000);
  EXPECT_TRUE(dtrain.running()) << "its end waits for the drive: " << dtrain.err();
  thaw();
  EXPECT_EQ(dtrain.Wait(30), 0) << dtrain.err();
  const std::string err = dtrain.err();
  EXPECT_GE(said_after_s, 9.5) << err;
  EXPECT_LT(said_after_s, 20) << err;  // the write blocks at ext4's next commit (<= 5 s)
  EXPECT_THAT(err, ::testing::ContainsRegex(
                       "dtrain: warning: a write to rank [01]'s log " + disk.path() +
                       "/hung/rank-[01].log has not returned in 1[0-9] s: the drive under the "
                       "job's folder hangs \\(see dmesg\\); the job goes on, and the ranks' "
                       "output is held in memory until the drive answers"));
  EXPECT_EQ(CountOf(err, "held in memory until the drive answers"), 1u) << "said once: " << err;
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

}  // namespace
}  // namespace dtrain
