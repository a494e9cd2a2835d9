// Each subcommand registers its flags on the app and, when chosen, sets `run` to the call that
// carries it out. Files here turn flags into calls and print results; no logic of their own.
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace dtrain {

using CommandRun = std::function<int()>;

void AddInitCommand(CLI::App& app, CommandRun& run);
void AddLaunchCommand(CLI::App& app, CommandRun& run);
void AddLogsCommand(CLI::App& app, CommandRun& run);
void AddStatusCommand(CLI::App& app, CommandRun& run);
void AddDoctorCommand(CLI::App& app, CommandRun& run);
void AddTimelineCommand(CLI::App& app, CommandRun& run);
void AddSyncCommand(CLI::App& app, CommandRun& run);
void AddCompletionCommand(CLI::App& app, CommandRun& run);

}  // namespace dtrain
