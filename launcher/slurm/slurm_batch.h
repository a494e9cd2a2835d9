// SlurmBatch: the batch job that holds an allocation when dtrain runs outside one, rendered
// from templates/sbatch.sh, and the words squeue uses for the state of a job.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

// The bytes of templates/sbatch.sh (embedded at build time).
std::string_view SbatchTemplate();

// templates/sbatch.sh with the job name, node count, tasks per node and one `#SBATCH` line per
// option of the `slurm:` section (partition, time, account, options). Throws dtrain::Error
// when a value holds a line break (it would end the directive).
std::string RenderSbatchScript(const SlurmSpec& slurm, const std::string& job_name, int nodes,
                               int tasks_per_node);

// One line of `squeue -h -j ID -o %T|%N|%r`: state, node list and pending reason.
struct SlurmJobState {
  std::string state;     // "PENDING", "RUNNING", ...; "" when squeue no longer knows the job
  std::string nodelist;  // hostlist expression; "" while pending
  std::string reason;
};

SlurmJobState ParseSqueueLine(const std::string& text);

// True for states from which the job never runs (FAILED, CANCELLED, TIMEOUT, ...).
bool IsFinishedJobState(const std::string& state);

}  // namespace dtrain
