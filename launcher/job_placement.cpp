// Where a job runs, settled before its first attempt (job_placement.h).
#include "launcher/job_placement.h"

#include <cstdlib>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/exit_status.h"
#include "launcher/job_supervisor.h"
#include "launcher/rank_log.h"

namespace dtrain {

void RecordFailureBeforeStart(const std::string& job_dir, JobRecord& record, int exit_code) {
  record.status = exit_code > 128 ? "interrupted" : "failed";
  record.exit_code = exit_code;
  record.ended_us = WallMicros();
  WriteJobRecord(job_dir, record);
}

void StopIfInterruptedBeforeStart(const std::string& job_dir, JobRecord& record,
                                  const char* during) {
  const int signal = JobSupervisor::InterruptSignal();
  if (signal == 0) return;
  RecordFailureBeforeStart(job_dir, record, 128 + signal);
  throw Error(fmt::format("job {} interrupted by {} {} before it started; no rank was started",
                          record.name, SignalName(signal), during),
              128 + signal);
}

ClusterSpec PlaceCluster(const ClusterSpec& spec, const JobFolder& folder,
                         SlurmAllocation& allocation, JobRecord& record,
                         const std::vector<std::string>& avoid) {
  try {
    const ClusterSpec placed =
        PlaceOnSlurm(spec, {"dtrain-" + folder.name, folder.job_dir, avoid}, allocation);
    record.nodes = placed.nodes;
    record.slurm = placed.slurm_placement;
    // Inside the caller's allocation srun finds the job in SLURM_JOB_ID; the record names it
    // for `dtrain status`, which runs elsewhere.
    const char* caller_job = std::getenv("SLURM_JOB_ID");
    if (record.slurm.placed && record.slurm.job_id.empty() && caller_job) {
      record.slurm.job_id = caller_job;
    }
    return placed;
  } catch (const Error& e) {
    RecordFailureBeforeStart(folder.job_dir, record, e.exit_code());
    throw;
  }
}

}  // namespace dtrain
