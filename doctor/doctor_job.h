// A test the doctor runs as a job of its own on every node (`--bandwidth`, `--compute`): dtrain
// launch's rank environment, transport and per-rank logs, one rank per node, or one per listed
// GPU where nodes list `gpus`; no restart, no console, in a temporary folder unless told one.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster_choice.h"
#include "launcher/cluster_spec.h"
#include "launcher/job_record.h"

namespace dtrain {

struct DoctorJob {
  int launch_status = 0;     // dtrain launch's exit status (1 when it refused to start)
  std::string launch_error;  // why it refused to start any rank ("" when it started)
  std::string job_dir;       // <log_dir>/<job>: job.json and the rank logs
  JobSummary summary;        // job.json: rank -> node, which rank failed and how (empty: none)
  std::string log_dir;
  bool temporary = false;  // log_dir was made for this job
};

// Runs `command` as job "doctor-<kind>-<time>" on the nodes of `cluster`; `probed` (the cluster
// as the doctor probed it) says whether nodes have GPUs. Throws dtrain::Error when no folder can
// be made; a launch that fails is in launch_status.
DoctorJob RunDoctorJob(const ClusterSpec& probed, const ClusterChoice& cluster,
                       const std::string& kind, const std::vector<std::string>& command,
                       const std::string& log_dir);

// One rank's whole log ("" when it has none).
std::string DoctorRankLog(const DoctorJob& job, int rank);

// Removes the job's temporary folder (when nothing needs reading later) and clears job_dir.
void RemoveTemporaryDoctorJob(DoctorJob& job);

// The folder of the running dtrain, where nodes look for dtrain-clip first (as dtrain launch's
// ranks and the doctor's probe do: templates/dtrain_program.sh); "" if unknown.
std::string DtrainDirectory();

// What a failed rank said: its last "error:" line (dtrain-clip's own, before any C++ stack the
// exception carried), else its last line.
std::string WhyRankFailed(const std::string& log);

}  // namespace dtrain
