// TmpfsDisk: a small disk of a test's own that fills up for real (ENOSPC), a tmpfs mounted at a
// path for the test's scope and unmounted (lazily, so a file left open does not keep it) at its
// end. Its folders and empty files take none of its size, so a full one still takes a new folder
// and empty files: only writes are refused. Needs root.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/support/fill_disk.h"
#include "tests/support/popen_shell.h"

namespace dtrain::testing {

class TmpfsDisk {
 public:
  // `size` as mount(8) takes it ("256k", "1m").
  TmpfsDisk(const std::string& path, const std::string& size) : path_(path) {
    if (::geteuid() != 0) {
      error_ = "needs root (a mount)";
      return;
    }
    std::filesystem::create_directories(path_);
    int status = 0;
    error_ = test::RunShell("mount -t tmpfs -o size=" + size + " tmpfs " + path_, &status);
    if (status == 0) error_.clear();
    mounted_ = status == 0;
  }
  ~TmpfsDisk() {
    int status = 0;
    if (mounted_) test::RunShell("umount -l " + path_, &status);
  }
  TmpfsDisk(const TmpfsDisk&) = delete;
  TmpfsDisk& operator=(const TmpfsDisk&) = delete;

  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }
  // Fills it with one file (path()/filler) until it refuses more.
  void Fill() const { FillDisk(path_); }

 private:
  std::string path_, error_;
  bool mounted_ = false;
};

}  // namespace dtrain::testing
