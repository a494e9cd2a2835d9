// Where a job runs, settled before its first attempt: a Slurm cluster placed on its allocation
// (the record names the Slurm job), and what a job that ends before any attempt keeps in its
// record.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/job_attempt.h"
#include "launcher/job_record.h"
#include "launcher/slurm/slurm_allocation.h"

namespace dtrain {

// A job that ends before any attempt (its nodes never came, --sync failed, Ctrl-C while it
// waited for nodes: 128+signal) says so in job.json.
void RecordFailureBeforeStart(const std::string& job_dir, JobRecord& record, int exit_code);

// Ctrl-C (any handled signal, JobSupervisor::InterruptSignal) before a rank started: records it
// (RecordFailureBeforeStart) and throws dtrain::Error "job J interrupted by SIGINT <during>
// before it started; no rank was started" with 128+signal; nothing when no signal came.
// `during` says what dtrain was doing ("during the health check").
void StopIfInterruptedBeforeStart(const std::string& job_dir, JobRecord& record,
                                  const char* during);

// The cluster on the nodes it runs on: a Slurm cluster on its allocation, the rest as they are.
// `avoid`: Slurm nodes to leave out where others can serve (--hold-back). A job whose placement
// fails (throws dtrain::Error) has said so in its record.
ClusterSpec PlaceCluster(const ClusterSpec& spec, const JobFolder& folder,
                         SlurmAllocation& allocation, JobRecord& record,
                         const std::vector<std::string>& avoid);

}  // namespace dtrain
