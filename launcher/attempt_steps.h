// The attempts' steps from rank 0's metrics file once it is fetched from its node at the end of
// a job (SSH nodes without shared storage, where StepWatch saw nothing live). Lines carrying a
// "time" (seconds since the epoch on the node's clock, Python's time.time()) or a "time_us"
// (microseconds, as dtrain-clip writes) are placed in the attempt whose run they fall in, after
// the node's measured clock offset; lines without one cannot be placed and are not used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/job_record.h"

namespace dtrain {

// Fills first_step, last_step and first_step_us of the attempts that ran rank 0 on `host` (their
// first node) and whose steps are unknown, from the lines of `metrics_path`. `clock_offset_us`:
// the launcher's clock minus the node's. Returns how many attempts it filled.
int FillAttemptSteps(std::vector<JobAttempt>& attempts, const std::string& host,
                     const std::string& metrics_path, int64_t clock_offset_us);

// Rank 0's metrics, fetched from its node into `job_dir`, give the steps of the attempts that ran
// rank 0 there; job.json is written again when they do.
void PlaceFetchedSteps(JobRecord& record, const std::string& job_dir);

}  // namespace dtrain
