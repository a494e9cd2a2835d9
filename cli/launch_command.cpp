// `dtrain launch`: flags -> LaunchOptions -> RunLaunch.
#include "cli/commands.h"
#include "launcher/launch.h"

namespace dtrain {

void AddLaunchCommand(CLI::App& app, CommandRun& run) {
  auto options = std::make_shared<LaunchOptions>();
  auto max_restarts = std::make_shared<int>(0);
  auto ranks = std::make_shared<std::vector<int>>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start a job on every node with the rank environment; stop all of it if any part fails");
  cmd->footer(
      "Without -c and without ./cluster.yaml, runs NPROC_PER_NODE local ranks (default: the "
      "devices in CUDA_VISIBLE_DEVICES, else 1).\nExit status: 0, the first failing rank's status "
      "(128+signal for a signal), 2 for a usage or cluster-file error.");
  cmd->add_option("-c,--cluster", options->cluster_file,
                  "cluster file (default: ./cluster.yaml, else one local node)");
  cmd->add_option("--nproc-per-node", options->nproc_per_node, "ranks per node (overrides slots)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--job", options->job_name, "job name (default: YYYYmmdd-HHMMSS-xxxx)");
  cmd->add_option("--log-dir", options->log_dir,
                  "where job folders go (default: the cluster file's log_dir)");
  CLI::Option* restarts = cmd->add_option("--max-restarts", *max_restarts,
                                          "restart the whole job up to K times after a failure")
                              ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--timeline", options->timeline, "write a per-rank timeline into the job folder");
  cmd->add_option("--ranks-filter", *ranks, "show only these ranks on the console (R,R,...)")
      ->delimiter(',')
      ->allow_extra_args(false);
  cmd->add_flag("--quiet,-q", options->quiet,
                "show no rank output on the console (logs still get it)");
  cmd->add_option("--grace-period", options->grace_period_s,
                  "seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("command", options->command, "the command each rank runs (after --)");
  cmd->callback([options, max_restarts, ranks, restarts, &run] {
    if (restarts->count() > 0) options->max_restarts = *max_restarts;
    options->ranks_filter.insert(ranks->begin(), ranks->end());
    run = [options] { return RunLaunch(*options); };
  });
}

}  // namespace dtrain
