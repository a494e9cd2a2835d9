// `dtrain launch` top to bottom: cluster file -> rank plan -> transport -> supervised job ->
// logs and job.json, restarting the whole job up to max_restarts times after a failure.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace dtrain {

struct LaunchOptions {
  std::string cluster_file;         // "" = ./cluster.yaml if present, else DefaultLocalCluster()
  int nproc_per_node = 0;           // > 0 overrides every node's slots
  std::string job_name;             // "" = NewJobName()
  std::string log_dir;              // "" = the cluster file's log_dir
  std::optional<int> max_restarts;  // unset: the cluster file's job.max_restarts
  bool timeline = false;            // or job.timeline in the cluster file
  std::set<int> ranks_filter;       // console only; empty = every rank
  bool quiet = false;               // console only
  double grace_period_s = 10;
  std::vector<std::string> command;  // empty: job.command, else the embedded default
};

// The command run when neither the command line nor the cluster file names one.
std::vector<std::string> DefaultJobCommand();

// Runs the job; returns dtrain's exit status (0, or the first failing rank's status).
// Throws UsageError for cluster-file and option problems.
int RunLaunch(const LaunchOptions& options);

}  // namespace dtrain
