// `dtrain status`: flags -> StatusOptions -> ReadJobStatus -> PrintJobStatus.
#include <cstdio>

#include "cli/commands.h"
#include "launcher/error.h"
#include "launcher/hangs/job_status.h"

namespace dtrain {

void AddStatusCommand(CLI::App& app, CommandRun& run) {
  auto options = std::make_shared<StatusOptions>();
  CLI::App* cmd = app.add_subcommand(
      "status", "Show a job's ranks now: node, pid, state, step, seconds idle, last line");
  cmd->footer(
      "Reads the job's files and asks each node (through the job's transport) which processes "
      "the job has; works from any terminal, while the job runs and after. More: man "
      "dtrain-status");
  cmd->add_option("--log-dir", options->log_dir,
                  "where job folders are (default: log_dir of ./cluster.yaml, else ./dtrain-logs)");
  cmd->add_option("--job", options->job, "job name (default: the newest job)");
  cmd->add_flag("--json", options->json, "print one JSON object instead of the table");
  cmd->callback([options, &run] {
    run = [options] {
      PrintJobStatus(ReadJobStatus(*options), options->json, stdout);
      return kExitOk;
    };
  });
}

}  // namespace dtrain
