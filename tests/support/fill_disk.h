// FillDisk: fills the file system at `dir` with one file (`dir`/filler) until it refuses more, for
// tests of a full disk (a tmpfs of their own, tests/support/tmpfs_disk.h, or an ext4 loop disk,
// tests/support/loop_disk.h). Removing the file frees the disk again.
#pragma once

#include <string>

#include "tests/support/popen_shell.h"

namespace dtrain::testing {

inline void FillDisk(const std::string& dir) {
  int status = 0;
  test::RunShell("dd if=/dev/zero of=" + dir + "/filler bs=64k 2>/dev/null; true", &status);
}

}  // namespace dtrain::testing
