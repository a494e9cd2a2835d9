#include "launcher/rank_log_outage.h"

#include <cstdio>

#include <fmt/format.h>

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

void SayWhatTheDiskRefused(const std::string& unwritten,
                           const std::map<int, std::unique_ptr<RankLog>>& logs,
                           const std::string& job_dir) {
  uint64_t lost = 0;
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
  if (!unwritten.empty()) {
    std::fprintf(stderr,
                 "dtrain: error: the job's end could not be recorded: %s; job.json tells of the "
                 "job as it was before, and `dtrain status` with it\n",
                 unwritten.c_str());
  }
}

}  // namespace dtrain
