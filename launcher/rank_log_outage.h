// Says on the console when the disk stops taking the rank logs' writes (full, an I/O error) and
// when it takes them again: one line each for the whole job, however many ranks' logs it refused.
// The job goes on meanwhile; each log marks its own gap (rank_log.h). At the launch's end, what
// the disk refused in all is said once more, last.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "launcher/job_file_writer.h"
#include "launcher/log_sync.h"
#include "launcher/rank_log.h"
#include "launcher/rank_log_writer.h"

namespace dtrain {

class RankLogOutage {
 public:
  explicit RankLogOutage(std::FILE* err) : err_(err) {}

  // After each write to `log`, rank `rank`'s.
  void AfterWrite(int rank, const RankLog& log);

 private:
  std::FILE* err_;
  std::map<int, uint64_t> refused_;  // rank -> its log's lost bytes before the outage
  uint64_t lost_ = 0;                // in this outage, by the logs that took writes again
  int logs_ = 0;                     // the logs that lost bytes in this outage
};

// The first failed sync of a rank log (log_sync.h), said once for the job: the drive under the
// logs failed while their writes still succeed, into the page cache only.
void SayLogSyncFailed(std::FILE* err, const LogSyncFailure& failure);
// A sync of a rank log that has not returned (LogSync::kStuckS), said once for the job: the drive
// under the logs hangs. `again`: a stuck sync or write was said before in this job (the same drive,
// the job's folder's), so the line says that briefly instead of saying it all again.
void SayLogSyncStuck(std::FILE* err, const LogSyncStuck& stuck, bool again = false);
// A write to a rank log that has not returned (rank_log_writer.h), said once for each hang: the
// output is held in memory meanwhile.
void SayLogWriteStuck(std::FILE* err, const LogWriteStuck& stuck, bool again = false);
// A write of dtrain's own files in the job's folder (job.json, a stall report) that has not
// returned (job_file_writer.h), said once for each hang.
void SayFileWriteStuck(std::FILE* err, const FileWriteStuck& stuck, bool again = false);

// The launch's end for the logs: everything the writer holds written (waiting for a drive that
// hangs, said), the last sync (`sync`, null when off) with job.json's, then SayWhatTheDiskRefused.
void EndTheLogs(const std::string& unwritten, const std::map<int, std::unique_ptr<RankLog>>& logs,
                RankLogWriter& writer, LogSync* sync, const std::string& job_dir);

// Said last at the launch's end, so it is not lost in the output above: how many bytes the rank
// logs lost, how many may not be on the disk (`sync`: the logs' syncs, null when off, and how
// their last one ended, job.json's sync with it), and, when job.json could not record the job's
// end, why (`unwritten`, "" when it did). The job's own exit status stands. `writer`: what wrote
// `logs`, with all it held written.
void SayWhatTheDiskRefused(const std::string& unwritten,
                           const std::map<int, std::unique_ptr<RankLog>>& logs,
                           const RankLogWriter& writer, const std::string& job_dir,
                           const LogSync* sync = nullptr, const LogSyncEnd& sync_end = {});

}  // namespace dtrain
