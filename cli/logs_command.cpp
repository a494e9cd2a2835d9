// `dtrain logs`: flags -> LogsOptions -> ShowLogs / ListJobs.
#include <cstdio>

#include "cli/commands.h"
#include "cli/number_checks.h"
#include "launcher/error.h"
#include "launcher/job_record.h"
#include "launcher/log_reader.h"

namespace dtrain {

void AddLogsCommand(CLI::App& app, CommandRun& run) {
  auto options = std::make_shared<LogsOptions>();
  auto list = std::make_shared<bool>(false);
  CLI::App* cmd =
      app.add_subcommand("logs", "Show what ranks printed: one rank, or all interleaved");
  cmd->add_option("--log-dir", options->log_dir,
                  "where job folders are (default: log_dir of ./cluster.yaml, else ./dtrain-logs)");
  cmd->add_option("--job", options->job, "job name (default: the newest job)");
  cmd->add_option("--rank", options->ranks, "rank to show; repeat for several (default: all)")
      ->check(WholeNumberAtLeast(0))
      ->allow_extra_args(false);
  cmd->add_option("--tail,-n", options->tail, "only the last N lines")
      ->check(WholeNumberAtLeast(0));
  cmd->add_flag("--follow,-f", options->follow, "keep printing new lines until the job ends");
  cmd->add_flag("--list", *list, "list the jobs in the log dir with their status");
  cmd->callback([options, list, &run] {
    run = [options, list] {
      if (options->log_dir.empty()) options->log_dir = DefaultLogDir();
      if (*list) {
        ListJobs(options->log_dir, stdout);
      } else {
        ShowLogs(*options, stdout);
      }
      return kExitOk;
    };
  });
}

}  // namespace dtrain
