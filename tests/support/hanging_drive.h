// A drive that hangs on demand: an ext4 loop disk (path()) backed by a file on a second ext4 loop
// disk, whose file system Hang() freezes (fsfreeze), so that the first disk takes no write and
// answers none, as a drive that stopped answering, until Answer() thaws it. Root.
#pragma once

#include <string>

#include "tests/support/loop_disk.h"
#include "tests/support/popen_shell.h"

namespace dtrain::testing {

class HangingDrive {
 public:
  explicit HangingDrive(const std::string& dir)
      : lower_(dir + "/lower", "512M"), disk_(lower_.path() + "/upper", "256M") {}
  ~HangingDrive() { Answer(); }
  HangingDrive(const HangingDrive&) = delete;
  HangingDrive& operator=(const HangingDrive&) = delete;

  // "" when both disks were made.
  const std::string& error() const {
    return lower_.error().empty() ? disk_.error() : lower_.error();
  }
  // Where the disk that hangs is mounted.
  const std::string& path() const { return disk_.path(); }
  // "" once the drive hangs, else what fsfreeze said.
  std::string Hang() {
    int status = 0;
    const std::string said = test::RunShell("fsfreeze -f " + lower_.path() + " 2>&1", &status);
    return status == 0 ? "" : said + " (fsfreeze failed)";
  }
  void Answer() {
    int status = 0;
    test::RunShell("fsfreeze -u " + lower_.path() + " 2>/dev/null", &status);
  }

  // Answer() when it goes out of scope: made after a DtrainProcess on the drive, so that the drive
  // answers before dtrain's end, which waits for it, is waited for, even when the test fails.
  struct AnswerAtEnd {
    HangingDrive& drive;
    ~AnswerAtEnd() { drive.Answer(); }
  };

 private:
  LoopDisk lower_;
  LoopDisk disk_;
};

}  // namespace dtrain::testing
