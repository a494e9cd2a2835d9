// What a job leaves besides its logs: <log_dir>/<job>/job.json (nodes, rank plan, command,
// start/end, exit status per rank; rewritten atomically as the job goes) and the
// <log_dir>/latest symlink to the newest job. Also the rules for job names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/job_file_writer.h"
#include "launcher/node_clock.h"
#include "launcher/rank_plan.h"
#include "launcher/transport.h"

namespace dtrain {

// One run of the whole job; a job restarted by --max-restarts has several.
struct JobAttempt {
  int restart_count = 0;
  int64_t started_us = 0;
  int64_t ended_us = 0;
  int exit_code = -1;  // -1 while running
  int failed_rank = -1;
  std::vector<std::string> nodes;  // the nodes it ran on
  std::string cause;  // "" (succeeded or running), node-lost, signal, stall, error, interrupted
  std::string blamed_node;  // "" when none
  std::string detail;       // one line on what happened
  int64_t fault_us = 0;     // when dtrain saw the fault (0: none)
  // Its first completed step, where seen (step_watch.h); 0: unknown.
  int64_t first_step_us = 0;
  int64_t first_step = -1;  // the step numbers of its first and last metrics lines; -1: unknown
  int64_t last_step = -1;
};

// Steps `a` completed that the attempt after it did again: a's last step minus the step `next`
// resumed from (its first step - 1); -1 when either is unknown.
int64_t StepsLost(const JobAttempt& a, const JobAttempt& next);

// "attempt 2 on node0,node2,node3: node-lost (node node1), node node1 lost: ...; next attempt's
// first step 14.2 s after the fault, 3 step(s) lost". `next`: the attempt after it, if any.
std::string DescribeAttempt(const JobAttempt& attempt, const JobAttempt* next);

// Something that happened while the job ran, beside starts and ends: a stall report (kind
// "stall", `file` the stall-N.txt it wrote).
struct JobEvent {
  int64_t time_us = 0;
  std::string kind;
  std::string text;  // one line
  std::string file;  // "" when none
};

// Everything job.json holds. `status` is running, waiting (for nodes: node_return_wait.h),
// succeeded, failed or interrupted.
struct JobRecord {
  std::string name;
  std::string status = "running";
  std::string cluster_source;
  std::string cluster_name;
  std::string transport;
  std::vector<std::string> command;
  std::string launch_dir;
  std::string log_dir;
  std::vector<NodeSpec> nodes;
  // The Slurm job a `transport: slurm` job runs in (its id also when dtrain runs inside the
  // caller's allocation) and the name of its steps; placed = false for other transports.
  SlurmPlacement slurm;
  // Node -> its clock as measured at launch (node_clock.h: offset = the launcher's clock minus
  // the node's), where measured; PyTorch traces carry their node's own clock.
  std::map<std::string, NodeClock> node_clocks;
  RankPlan plan;
  int max_restarts = 0;
  bool timeline = false;
  double stall_timeout_s = 0;  // 0: no stall watch
  std::string on_stall;        // report | stop
  int64_t started_us = 0;
  int64_t ended_us = 0;
  int exit_code = -1;  // -1 while running
  int failed_rank = -1;
  std::map<int, ExitStatus> rank_status;  // latest attempt; absent while the rank runs
  std::vector<JobAttempt> attempts;
  std::vector<JobEvent> events;
  double node_timeout_s = 0;                       // 0: nodes not watched
  std::map<std::string, std::string> quarantined;  // node -> why it is no longer used
  // Not in job.json: why its last write failed (a full disk), "" when it was written; and, once
  // the ranks may run, the thread that writes it (job_file_writer.h; null: written by the caller).
  std::string unwritten;
  JobFileWriter* writer = nullptr;
};

// The part of job.json that `dtrain logs` and `dtrain timeline` read back.
struct JobSummary {
  std::string name;
  std::string status;
  std::vector<std::string> command;
  int64_t started_us = 0;
  int64_t ended_us = 0;
  int exit_code = -1;
  int failed_rank = -1;
  int restarts = 0;
  std::string launcher_host;
  int launcher_pid = 0;
  std::map<int, std::string> rank_hosts;  // rank -> node name
  std::string transport;                  // local, ssh or slurm
  std::string cluster_file;               // as given to dtrain launch (relative to launch_dir)
  std::string launch_dir;
  std::map<int, std::string> rank_addresses;         // rank -> node address the launcher used
  std::map<std::string, std::string> node_machines;  // node name -> its machine (a Slurm node)
  SlurmPlacement slurm;                              // as JobRecord::slurm
  std::map<int, std::string> rank_traces;            // rank -> DTRAIN_TIMELINE as the rank saw it
  std::map<int, std::string> rank_metrics;           // rank -> $DTRAIN_LOG_DIR/metrics/rank-R.jsonl
  std::string rank_job_dir;  // $DTRAIN_LOG_DIR (the job's folder) as every rank saw it ("": none)
  std::string trace_dir;     // $DTRAIN_TRACE_DIR as every rank saw it on its node ("": no log_dir)
  std::map<int, int64_t> rank_clock_offsets_us;  // rank -> its node's clock offset, if measured
  std::map<int, std::string> rank_exits;  // rank -> "exit 0", "killed by SIGKILL"; absent: running
  double stall_timeout_s = 0;
  std::vector<JobEvent> events;
  std::vector<JobAttempt> attempts;
  std::map<std::string, std::string> quarantined;  // node -> why
};

std::string JobRecordPath(const std::string& job_dir);
// Writes job.json through a temporary file and rename, so readers never see half a record. A
// write the disk refuses does not throw: the job goes on, the record keeps why (`unwritten`) and
// is written whole by the next call the disk takes; the first refusal in a row and the write
// after the last are said on stderr. With `record.writer`, the record's text is handed to it, and
// it keeps why (JobFileWriter::Refused).
void WriteJobRecord(const std::string& job_dir, JobRecord& record);
// The record's first write, before any rank starts: throws Error naming the file and what to do
// when the disk refuses it, so that no job runs without its record.
void WriteFirstJobRecord(const std::string& job_dir, JobRecord& record);
// Throws Error naming the file when it is missing or not a job record.
JobSummary ReadJobSummary(const std::string& job_dir);
// The same of a record's text already read from `path` (named in the error).
JobSummary ParseJobSummary(const std::string& text, const std::string& path);

// YYYYmmdd-HHMMSS-xxxx (UTC, 4 random hex digits).
std::string NewJobName();
// Job names are one path component: [A-Za-z0-9._-]+, not starting with '.'. Throws UsageError.
void CheckJobName(const std::string& name);
// Points <log_dir>/latest at `name` (relative link, replaced atomically).
void PointLatestAt(const std::string& log_dir, const std::string& name);
// The log dir when --log-dir is not given: log_dir of ./cluster.yaml if it parses, else
// ./dtrain-logs.
std::string DefaultLogDir();

}  // namespace dtrain
