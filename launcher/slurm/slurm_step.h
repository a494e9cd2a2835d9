// SlurmStep: one Transport::Start() call as one srun job step. Each task runs a small sh wrapper
// that picks its rank's environment by SLURM_PROCID, checks that SLURM_NODEID, SLURM_LOCALID and
// SLURM_NTASKS agree with the plan, runs the command and reports its exit status.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/transport.h"

namespace dtrain {

// Everything needed to run and follow the step; built from the ProcessSpecs and the nodes of
// the placed spec. Pure data.
struct SlurmStepPlan {
  std::vector<int> task_ids;    // task t (SLURM_PROCID) -> ProcessSpec::id
  std::vector<int> task_node;   // task t -> position of its node in `hosts` (SLURM_NODEID)
  std::vector<int> task_local;  // task t -> SLURM_LOCALID
  int node_count = 0;
  int tasks_per_node = 0;                  // 0 when nodes run different numbers of tasks
  std::vector<std::string> hosts;          // the allocation's nodes the step runs on, node 0 first
  std::vector<std::string> argv;           // the command every task runs
  std::map<std::string, std::string> env;  // set for srun, which passes it on to the tasks
  std::string cwd;                         // "" = srun's own
  std::string stdin_data;                  // sent to every task (srun --input=all)
  std::string marker;                      // tags the wrapper's status lines
  bool overlap = false;  // shares the CPUs the job's other steps hold (ProcessSpec::beside_ranks)
};

// Throws dtrain::Error when the processes do not fit one step: every task must run the same
// command in the same directory with the same stdin, all beside the ranks or none. `spec` is placed
// on its allocation (launcher/slurm/slurm_allocation.h): a process's node_index names the allocated
// node it runs on, and the processes' environments are taken as they are. `heartbeat`: every task
// says it is alive on srun's stderr every half second (SlurmTaskLine::alive).
SlurmStepPlan PlanSlurmStep(const std::vector<ProcessSpec>& procs, const ClusterSpec& spec,
                            const std::string& marker, bool heartbeat = false);

// SLURM_HOSTFILE's text (one host per task) for steps with uneven tasks per node.
std::string SlurmHostfile(const SlurmStepPlan& plan);

// srun's command line; with uneven tasks per node srun also needs SLURM_HOSTFILE. job_id "" runs
// inside the current allocation (SLURM_JOB_ID).
std::vector<std::string> SrunArgv(const SlurmStepPlan& plan, const std::string& job_id,
                                  const std::string& step_name);

// What one line of the wrapper's labelled output says.
struct SlurmTaskLine {
  int task = -1;         // -1: not a task line (srun itself wrote it)
  std::string output;    // the task's bytes, "\n" included when the task wrote one
  bool started = false;  // the wrapper's start line: step_id is set
  std::string step_id;   // "JOB.STEP"
  bool alive = false;    // the wrapper's heartbeat (on srun's stderr)
  bool exited = false;   // the wrapper's end line: status is set
  int status = 0;        // the command's shell status (128+signal for a signal)
};

// Parses one line of `srun --label` output (without its '\n'; `newline` says if it had one).
SlurmTaskLine ParseSlurmTaskLine(std::string_view line, bool newline, const std::string& marker);

// The per-task wrapper, run as `sh -c SCRIPT dtrain-task COMMAND...`.
const std::string& SlurmTaskScript();

}  // namespace dtrain
