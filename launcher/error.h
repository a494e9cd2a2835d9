// Errors carry enough context to act on (file:line:col, node, rank) and the exit status that
// the one place in cli/ turns them into. Thrown, caught only in cli/main.cpp.
#pragma once

#include <stdexcept>
#include <string>

namespace dtrain {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,  // a check failed, a job could not run
  kExitUsage = 2,    // bad command line or cluster file
  kExitStalled = 124,  // dtrain launch --on-stall stop stopped a stalled job (timeout(1)'s 124)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, int exit_code = kExitFailure)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A usage or cluster-file error: exit status 2.
inline Error UsageError(const std::string& message) { return Error(message, kExitUsage); }

}  // namespace dtrain
