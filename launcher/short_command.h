// A short command (a client program, a query such as `nvidia-smi -L`) run to completion as a
// child of dtrain (launcher/subprocess.h, its own process group), with its output captured and
// a deadline after which it is killed.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

// How a short command ended and what it printed.
struct ShortCommandResult {
  int status = -1;  // exit code, 128+signal, or -1 when it could not run or timed out
  bool started = false;
  std::string out;
  std::string err;  // its stderr; why it could not start; "... did not answer within N s"
  std::string Describe() const;  // stderr's text, else "exit N"
};

// Runs argv[0] (looked up in PATH) with `input` on stdin (else /dev/null), killing it after
// timeout_ms.
ShortCommandResult RunShortCommand(const std::vector<std::string>& argv, const std::string& input,
                                   int timeout_ms);

}  // namespace dtrain
