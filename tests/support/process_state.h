// A process's state as the kernel shows it in /proc/<pid>/stat.
#pragma once

#include <string>

#include "tests/support/files.h"

namespace dtrain::testing {

// The state letter (R, S, T, Z...), 0 for a process that is gone. The command name before it may
// hold spaces and parentheses, so the letter is found after the last ')'. ReadFile takes a read
// that fails as the end of the file: that of a process reaped since the file's opening fails with
// ESRCH, which an istreambuf_iterator over the file would throw.
inline char ProcessState(int pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || stat.size() < paren + 3 ? 0 : stat[paren + 2];
}

}  // namespace dtrain::testing
