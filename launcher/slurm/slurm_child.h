// Slurm's client programs (srun, sbatch, squeue, scancel) run as children of dtrain, each in its
// own process group so a Ctrl-C at the terminal reaches dtrain only, never srun directly.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace dtrain {

// A running child with pipes: `in` (-1 when stdin is /dev/null), `out`, `err`. The owner
// closes the descriptors and reaps the pid.
struct SlurmChild {
  pid_t pid = -1;
  int in = -1;
  int out = -1;
  int err = -1;
};

// This process's environment with `overrides` set on top, as "NAME=value" strings.
std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& overrides);

// Starts argv[0] (looked up in PATH) with `env` (NAME=value strings). Throws dtrain::Error
// naming the program when it cannot be started.
SlurmChild SpawnSlurmChild(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, bool with_stdin);

// What a short client command left: how it ended and what it printed.
struct SlurmCommandResult {
  int status = -1;  // exit code, 128+signal, or -1 when it could not run or timed out
  std::string out;
  std::string err;
  std::string Describe() const;  // stderr's text, else "exit N"
};

// Runs a client command to completion with `input` on stdin, killing it after timeout_ms.
SlurmCommandResult RunSlurmCommand(const std::vector<std::string>& argv, const std::string& input,
                                   int timeout_ms);

// Decodes a waitpid status: exit code, or 128+signal.
int ShellStatusOf(int wait_status);

}  // namespace dtrain
