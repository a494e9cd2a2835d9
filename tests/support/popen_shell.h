// A shell command run through popen(3), for tests that link nothing of dtrain's (shell_run.h has
// the launcher's Subprocess): what it wrote and how it ended.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace dtrain::test {

// Runs `command` in sh, stdout and stderr together; its exit status in *status (-1 when it did
// not exit, or sh could not be started).
inline std::string RunShell(const std::string& command, int* status) {
  std::string out;
  std::FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
  int s = ::pclose(pipe);
  *status = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
  return out;
}

}  // namespace dtrain::test
