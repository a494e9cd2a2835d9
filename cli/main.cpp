// dtrain: flags in, calls out. The one place where errors become exit statuses.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "launcher/error.h"

int main(int argc, char** argv) {
  CLI::App app{"dtrain: check, launch and inspect distributed training jobs"};
  app.set_version_flag("--version", std::string("dtrain ") + DTRAIN_VERSION);
  app.require_subcommand(1);
  dtrain::CommandRun run;
  dtrain::AddInitCommand(app, run);
  dtrain::AddDoctorCommand(app, run);
  dtrain::AddLaunchCommand(app, run);
  dtrain::AddLogsCommand(app, run);
  dtrain::AddTimelineCommand(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return dtrain::kExitUsage;
  }
  try {
    return run ? run() : dtrain::kExitUsage;
  } catch (const dtrain::Error& e) {
    std::fprintf(stderr, "dtrain: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dtrain: internal error: %s\n", e.what());
    return dtrain::kExitFailure;
  }
}
