// `dtrain launch`: registered so the command line is complete; the implementation follows.
#include <cstdio>

#include "cli/commands.h"
#include "launcher/error.h"

namespace dtrain {

void AddLaunchCommand(CLI::App& app, CommandRun& run) {
  CLI::App* cmd = app.add_subcommand("launch", "launch (not available yet)");
  cmd->allow_extras();
  cmd->callback([&run] {
    run = [] {
      std::fprintf(stderr, "dtrain launch: not available yet\n");
      return kExitFailure;
    };
  });
}

}  // namespace dtrain
