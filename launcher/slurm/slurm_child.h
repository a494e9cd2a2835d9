// Slurm's client programs (srun, sbatch, squeue, scancel) run as children of dtrain
// (launcher/subprocess.h), each in its own process group so a Ctrl-C at the terminal reaches
// dtrain only, never srun directly.
#pragma once

#include <string>
#include <vector>

#include "launcher/short_command.h"
#include "launcher/subprocess.h"

namespace dtrain {

// Starts argv[0] (looked up in PATH) with `env` on top of this process's environment, stdout
// and stderr on pipes, stdin a pipe when `with_stdin` (else /dev/null). It is sent SIGTERM when
// the thread that started it ends (dtrain killed: srun then cancels its step). Throws
// dtrain::Error naming the program when it cannot be started.
Subprocess StartSlurmClient(const std::vector<std::string>& argv, const EnvOverrides& env,
                            bool with_stdin);

// What a short client command left: how it ended and what it printed.
using SlurmCommandResult = ShortCommandResult;

// Runs a client command to completion with `input` on stdin, killing it after timeout_ms
// (RunShortCommand); one that cannot start says to check that Slurm's client is on PATH.
SlurmCommandResult RunSlurmCommand(const std::vector<std::string>& argv, const std::string& input,
                                   int timeout_ms);

}  // namespace dtrain
