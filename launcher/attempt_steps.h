// The attempts' steps from rank 0's metrics file once it is fetched from its node at the end of
// a job (SSH nodes without shared storage, where StepWatch saw nothing live). Lines carrying a
// "time" (seconds since the epoch on the node's clock, Python's time.time()) or a "time_us"
// (microseconds, as dtrain-clip writes) are placed in the attempt whose run they fall in, after
// the node's measured clock offset; lines without one cannot be placed and are not used. An
// attempt whose rank 0 ran on another node reads that node's file, and where that node was lost,
// another node's first rank's: every rank steps together.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "launcher/job_record.h"

namespace dtrain {

// Fills first_step, last_step and first_step_us of the attempts that ran rank 0 on `host` (their
// first node) and whose steps are unknown, from the lines of `metrics_path`. `clock_offset_us`:
// the launcher's clock minus the node's. Returns how many attempts it filled.
int FillAttemptSteps(std::vector<JobAttempt>& attempts, const std::string& host,
                     const std::string& metrics_path, int64_t clock_offset_us);

// Whether `attempt`'s steps, unknown, must be read from another node than the last plan's rank 0
// (`rank_hosts`: rank -> node): its rank 0 ran elsewhere.
bool StepsFromAnotherNode(const JobAttempt& attempt, const std::map<int, std::string>& rank_hosts);

// Where the steps of an attempt whose rank 0 ran on another node than the last attempt's can be
// read: the first of its nodes that was not lost (its rank 0's own, unless lost), and the first
// rank that node ran in it. Ranks are placed node by node in the
// attempt's order of nodes; how many a node ran is read from the job's last plan
// (`rank_hosts`: rank -> node), where every node ran as many ranks (or the node itself did).
struct AttemptStepSource {
  std::string host;  // "": none
  int rank = -1;
};
AttemptStepSource StepSourceOf(const JobAttempt& attempt,
                               const std::map<int, std::string>& rank_hosts,
                               const std::set<std::string>& lost);

// Where the fetch puts that rank's metrics for attempt `attempt` (JobAttempt::restart_count + 1).
std::string EarlierMetricsPath(const std::string& job_dir, int attempt, int rank);

// Rank 0's metrics, fetched from its node into `job_dir`, give the steps of the attempts that ran
// rank 0 there; those of an attempt whose rank 0 ran elsewhere (a node lost, or left: a
// straggler, unfit) come from the file EarlierMetricsPath names, where the fetch put it, for the
// node StepSourceOf picks (`lost`: the nodes that were lost). job.json is written again when
// they do.
void PlaceFetchedSteps(JobRecord& record, const std::string& job_dir,
                       const std::set<std::string>& lost);

}  // namespace dtrain
