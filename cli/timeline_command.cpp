// `dtrain timeline`: registered so the command line is complete; reports that it is not built yet.
#include <cstdio>

#include "cli/commands.h"
#include "launcher/error.h"

namespace dtrain {

void AddTimelineCommand(CLI::App& app, CommandRun& run) {
  CLI::App* cmd = app.add_subcommand("timeline", "timeline (not available yet)");
  cmd->allow_extras();
  cmd->callback([&run] {
    run = [] {
      std::fprintf(stderr, "dtrain timeline: not available yet\n");
      return kExitFailure;
    };
  });
}

}  // namespace dtrain
