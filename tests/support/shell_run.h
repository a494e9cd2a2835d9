// A shell command run to its end as a Subprocess: what it wrote (stdout and stderr together, or
// stdout alone) and how it ended.
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

// A shell command's output and its status as a shell reports it ($?: the exit code, 128 + N for
// signal N; 255 where sh could not be started).
struct ShellOutput {
  std::string out;
  int status = -1;
};

// `sh -c SCRIPT`: stdout and stderr together, and the status.
inline ShellOutput Shell(const std::string& script) {
  const ShellRun run = RunShell(script);
  return {run.out, run.status.ShellStatus()};
}

// `sh -c SCRIPT`: stdout alone (stderr goes where the test's own goes), and the status.
inline ShellOutput ShellStdout(const std::string& script) {
  SubprocessOptions options;
  options.argv = {"sh", "-c", script};
  options.err = Stdio::kInherit;
  Subprocess child;
  ShellOutput result;
  if (!child.Start(options).empty()) return {"", 255};
  result.out = ReadToEnd(child.out_fd);
  result.status = child.Finish().ShellStatus();
  return result;
}

}  // namespace dtrain::testing
