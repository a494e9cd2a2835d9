// Slurm's clients as Subprocesses; short ones through RunShortCommand.
#include "launcher/slurm/slurm_child.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

constexpr const char* kSlurmClientHint = " (is Slurm's client installed and on PATH?)";

}  // namespace

Subprocess StartSlurmClient(const std::vector<std::string>& argv, const EnvOverrides& env,
                            bool with_stdin) {
  SubprocessOptions options;
  options.argv = argv;
  options.env = env;
  options.in = with_stdin ? Stdio::kPipe : Stdio::kNull;
  // srun outlives a dtrain killed with SIGKILL (its own process group keeps Ctrl-C away from it),
  // and its step would run on unwatched. SIGTERM when dtrain (the forking thread) ends makes it
  // cancel its step. Set before exec, so a parent already gone is seen too.
  const pid_t parent = ::getpid();
  options.pre_exec = [parent] {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::raise(SIGTERM);
  };
  Subprocess child;
  const std::string error = child.Start(options);
  if (!error.empty()) throw Error(error + kSlurmClientHint);
  return child;
}

SlurmCommandResult RunSlurmCommand(const std::vector<std::string>& argv, const std::string& input,
                                   int timeout_ms) {
  SlurmCommandResult result = RunShortCommand(argv, input, timeout_ms);
  if (!result.started) result.err += kSlurmClientHint;
  return result;
}

}  // namespace dtrain
