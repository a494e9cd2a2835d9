// A shell command run to its end as a Subprocess: what it wrote (stdout and stderr together)
// and how it ended.
#pragma once

#include <string>

#include "launcher/subprocess.h"

namespace dtrain::testing {

// Everything a pipe carries until its end.
inline std::string ReadToEnd(int& fd) {
  std::string text;
  char buffer[4096];
  while (fd >= 0) text.append(buffer, Subprocess::Read(fd, buffer, sizeof buffer));
  return text;
}

struct ShellRun {
  ExitStatus status;  // error set when sh could not be started
  std::string out;    // stdout and stderr, in the order written
};

// Runs `sh -c SCRIPT` with stderr joined to stdout.
inline ShellRun RunShell(const std::string& script) {
  SubprocessOptions options;
  options.argv = {"sh", "-c", "exec 2>&1; " + script};
  options.err = Stdio::kNull;
  Subprocess child;
  ShellRun run;
  run.status.error = child.Start(options);
  if (!run.status.error.empty()) return run;
  run.out = ReadToEnd(child.out_fd);
  run.status = child.Finish();
  return run;
}

}  // namespace dtrain::testing
