#include "launcher/rank_log_outage.h"

#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "launcher/job_record.h"

namespace dtrain {

void RankLogOutage::AfterWrite(int rank, const RankLog& log) {
  if (!log.failing().empty()) {
    if (refused_.count(rank)) return;
    // The bytes of the write just refused are lost in this outage too.
    refused_[rank] = log.lost_bytes() - log.gap_bytes();
    if (refused_.size() > 1 || logs_ > 0) return;
    fmt::print(err_,
               "dtrain: warning: cannot write rank {}'s log {}: {}; the job goes on, but what "
               "the ranks print is lost from their logs until the disk takes it again (each log "
               "marks its gap): free space there, or see dmesg for the drive\n",
               rank, log.path(), log.failing());
    std::fflush(err_);
    return;
  }
  auto refused = refused_.find(rank);
  if (refused == refused_.end()) return;
  lost_ += log.lost_bytes() - refused->second;
  ++logs_;
  refused_.erase(refused);
  if (!refused_.empty()) return;
  fmt::print(err_,
             "dtrain: the rank logs are written again; {} byte(s) of output were lost from {} "
             "log(s), each gap marked in its log\n",
             lost_, logs_);
  std::fflush(err_);
  lost_ = 0;
  logs_ = 0;
}

void SayLogSyncFailed(std::FILE* err, const LogSyncFailure& failure) {
  fmt::print(err,
             "dtrain: warning: the disk under rank {}'s log {} failed to keep it (fsync: {}): "
             "the {} byte(s) it took in the last {:.1f} s may not be on the disk, nor what the "
             "logs take while the drive fails; the job goes on: see dmesg for the drive, and give "
             "the next job's folder another disk (--log-dir)\n",
             failure.rank, failure.path, failure.error, failure.bytes, failure.since_s);
  std::fflush(err);
}

namespace {

// Where a stuck sync or write is said: the first says the drive hangs and that the job goes on;
// one after it (`again`) says so briefly, as the same drive.
std::string DriveHangs(bool again) {
  return again ? " either (the drive under the job's folder hangs, as said above),"
               : ": the drive under the job's folder hangs (see dmesg); the job goes on,";
}

}  // namespace

void SayLogSyncStuck(std::FILE* err, const LogSyncStuck& stuck, bool again) {
  fmt::print(err,
             "dtrain: warning: the sync of rank {}'s log {} has not returned in {:.0f} s{} but "
             "what the logs take may not reach the disk\n",
             stuck.rank, stuck.path, stuck.seconds, DriveHangs(again));
  std::fflush(err);
}

void SayLogWriteStuck(std::FILE* err, const LogWriteStuck& stuck, bool again) {
  fmt::print(err,
             "dtrain: warning: a write to rank {}'s {} {} has not returned in {:.0f} s{} and the "
             "ranks' output is held in memory until the drive answers ({} byte(s) so far; past {} "
             "MiB it is lost, and each log marks its gap)\n",
             stuck.rank, stuck.what, stuck.path, stuck.seconds, DriveHangs(again), stuck.held_bytes,
             RankLogWriter::kHeldBytes >> 20);
  std::fflush(err);
}

void SayFileWriteStuck(std::FILE* err, const FileWriteStuck& stuck, bool again) {
  fmt::print(err,
             "dtrain: warning: a write to {} has not returned in {:.0f} s{} and dtrain writes the "
             "file once the drive answers\n",
             stuck.path, stuck.seconds, DriveHangs(again));
  std::fflush(err);
}

void SayWhatTheDiskRefused(const std::string& unwritten,
                           const std::map<int, std::unique_ptr<RankLog>>& logs,
                           const RankLogWriter& writer, const std::string& job_dir,
                           const LogSync* sync, const LogSyncEnd& sync_end) {
  uint64_t lost = writer.unmarked_bytes();
  int refused = 0;
  for (const auto& [rank, log] : logs) {
    lost += log->lost_bytes();
    refused += log->lost_bytes() > 0;
  }
  if (lost > 0) {
    std::fprintf(stderr,
                 "dtrain: warning: %llu byte(s) of the ranks' output could not be written to "
                 "%d of the logs in %s; each log marks where\n",
                 static_cast<unsigned long long>(lost), refused, job_dir.c_str());
  }
  if (sync && sync->unsure_bytes() > 0) {
    std::fprintf(stderr,
                 "dtrain: warning: %llu byte(s) the rank logs in %s took may not be on the disk: "
                 "their syncs failed (%s), so the logs may miss them without a mark\n",
                 static_cast<unsigned long long>(sync->unsure_bytes()), job_dir.c_str(),
                 sync->error().c_str());
  }
  if (sync && !sync_end.returned) {
    std::fprintf(stderr,
                 "dtrain: warning: the last sync of the rank logs in %s did not return in %.0f s: "
                 "the drive under them may be failing (see dmesg), and what they took last may "
                 "not be on it\n",
                 job_dir.c_str(), LogSync::kLastSyncWaitS);
  }
  if (unwritten.empty() && !sync_end.also_error.empty()) {
    std::fprintf(stderr,
                 "dtrain: error: the job's end may not be kept: the sync of %s/job.json failed "
                 "(%s); read now, it tells of the end, but once this machine restarts it may tell "
                 "of the job as it was before\n",
                 job_dir.c_str(), sync_end.also_error.c_str());
  }
  if (!unwritten.empty()) {
    std::fprintf(stderr,
                 "dtrain: error: the job's end could not be recorded: %s; job.json tells of the "
                 "job as it was before, and `dtrain status` with it\n",
                 unwritten.c_str());
  }
}

void EndTheLogs(const std::string& unwritten, const std::map<int, std::unique_ptr<RankLog>>& logs,
                RankLogWriter& writer, LogSync* sync, const std::string& job_dir) {
  if (!writer.Drain(RankLogWriter::kLastWaitS)) {
    // The kernel holds dtrain's write until the drive answers, and dtrain's end with it: what the
    // writer holds is written then, before dtrain ends.
    std::fprintf(stderr,
                 "dtrain: warning: the drive under %s hangs: %llu byte(s) of the ranks' output "
                 "wait in memory for the logs; dtrain ends once the drive answers and they are "
                 "written (the kernel holds its write until then)\n",
                 job_dir.c_str(), static_cast<unsigned long long>(writer.held_bytes()));
    writer.DrainAll();
  }
  LogSyncEnd sync_end;
  // The logs' last bytes, and job.json's end, on the disk before dtrain says it is done.
  if (sync) sync_end = sync->Finish(LogSync::kLastSyncWaitS, JobRecordPath(job_dir));
  SayWhatTheDiskRefused(unwritten, logs, writer, job_dir, sync, sync_end);
}

}  // namespace dtrain
