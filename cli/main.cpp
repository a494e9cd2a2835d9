// dtrain: flags in, calls out. The one place where errors become exit statuses.
#include <algorithm>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/argument_split.h"
#include "cli/commands.h"
#include "launcher/error.h"
#include "launcher/ssh/ssh_session_pool.h"

int main(int argc, char** argv) {
  // SSH connections kept for reuse close before main returns, while all they need is there.
  const dtrain::SshSessionPool::CloseAtScopeEnd close_ssh_sessions;
  CLI::App app{"dtrain: check, launch and inspect distributed training jobs", "dtrain"};
  app.set_version_flag("--version", std::string("dtrain ") + DTRAIN_VERSION);
  app.require_subcommand(1);
  app.footer("`dtrain help COMMAND` or `dtrain COMMAND --help` for one command; man dtrain");
  dtrain::CommandRun run;
  dtrain::AddInitCommand(app, run);
  dtrain::AddDoctorCommand(app, run);
  dtrain::AddLaunchCommand(app, run);
  dtrain::AddLogsCommand(app, run);
  dtrain::AddStatusCommand(app, run);
  dtrain::AddTimelineCommand(app, run);
  dtrain::AddSyncCommand(app, run);
  dtrain::AddCompletionCommand(app, run);
  app.add_subcommand("help", "Show the help of a command: dtrain help COMMAND")
      ->allow_extras();  // rewritten to `COMMAND --help` before parsing
  std::vector<std::string> words;
  std::string command = "dtrain";
  try {
    words = dtrain::SplitArguments(app, std::vector<std::string>(argv + 1, argv + argc));
    if (!words.empty() && words[0][0] != '-') command = "dtrain " + words[0];
    std::reverse(words.begin(), words.end());  // CLI11 takes them last word first
    app.parse(words);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RequiredError& e) {
    std::fprintf(stderr, "%s: %s; `%s --help` shows what is needed\n", command.c_str(), e.what(),
                 command.c_str());
    return dtrain::kExitUsage;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s; `%s --help` lists the options\n", command.c_str(), e.what(),
                 command.c_str());
    return dtrain::kExitUsage;
  } catch (const dtrain::Error& e) {
    std::fprintf(stderr, "dtrain: %s\n", e.what());
    return e.exit_code();
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
