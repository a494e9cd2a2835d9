// `dtrain status`: a live view of a job from any terminal, built from its files (job.json, rank
// logs) and one rank probe through the job's transport — never from the launching process.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace dtrain {

struct StatusOptions {
  std::string log_dir;  // "" = DefaultLogDir()
  std::string job;      // "" = the newest job
  bool json = false;
};

// One rank's line.
struct RankStatus {
  int rank = 0;
  std::string host;
  int pid = 0;           // 0: not found (or the job ended)
  std::string state;     // running, sleeping, stopped, ..., or how it ended
  std::string step;      // dtrain-clip's step, "" when unknown
  std::string activity;  // dtrain-clip's activity, "" when unknown
  double idle_s = -1;    // seconds since its last progress (log written, heartbeat); -1 unknown
  double cpu_s = -1;
  std::string last_line;
};

struct JobStatus {
  std::string job;
  std::string job_dir;
  std::string status;  // job.json's: running, waiting, succeeded, failed, interrupted
  // While the job waits for nodes (status waiting): what for and how long, and since when.
  std::string waiting_for_nodes;
  int64_t waiting_since_us = 0;
  std::string transport;
  int exit_code = -1;
  double stall_timeout_s = 0;
  std::vector<RankStatus> ranks;
  std::vector<std::string> stall_reports;  // stall-N.txt files, in order
  std::map<std::string, std::string> node_errors;
  std::vector<std::string> attempts;               // one line each (DescribeAttempt), if restarted
  std::map<std::string, std::string> quarantined;  // node -> why it is no longer used
  std::vector<std::string> health_warnings;        // the health checks' warnings (a flaky link)
  std::vector<std::string> elastic_rounds;  // an elastic Horovod job's: which node left, and why
  std::vector<std::string> stragglers;      // the straggler watch's findings, in order
  std::vector<std::string> held_back;  // nodes an earlier job quarantined, held back (--hold-back)
};

// Throws Error when the job cannot be found or read.
JobStatus ReadJobStatus(const StatusOptions& options);
void PrintJobStatus(const JobStatus& status, bool json, std::FILE* out);

}  // namespace dtrain
