// LoopDisk: a disk of a test's own. An ext4 file system on a loop device over a sparse file,
// mounted for one test (`mount -o loop`, so the device goes with the mount). Fail() makes the
// disk go away under the mounted file system, as an NVMe drive that fell off the bus does: the
// image is cut to nothing and the loop device told its new size, so every read or write the
// kernel sends it from then on ends in an I/O error. What was in the page cache stays readable;
// a write is accepted into it and its fsync reports EIO; ext4 then aborts its journal and every
// later change is refused (EROFS), while /proc/mounts still says rw. Needs root, losetup and
// mkfs.ext4.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/support/popen_shell.h"

namespace dtrain::testing {

class LoopDisk {
 public:
  // Why a test without root cannot have one (its GTEST_SKIP text).
  static constexpr char kNeedsRoot[] = "needs root (a loop device, a mount)";

  // `dir`: a scratch folder for the image and the mount point (`dir`/mnt); `mount_at`, when
  // given, a command prefix that mounts elsewhere (another mount namespace: a namespace node's
  // `make-cluster.sh node DIR I`) at `mount_point`; `options`: ext4's mount options beside
  // `loop` ("commit=60").
  explicit LoopDisk(const std::string& dir, const std::string& size = "256M",
                    const std::string& mount_at = "", const std::string& mount_point = "",
                    const std::string& options = "") {
    if (::geteuid() != 0) {
      error_ = kNeedsRoot;
      return;
    }
    std::filesystem::create_directories(dir);
    image_ = dir + "/disk.img";
    mount_ = mount_point.empty() ? dir + "/mnt" : mount_point;
    mount_at_ = mount_at;
    std::string out;
    if (!Shell("truncate -s " + size + " " + image_ + " && mkfs.ext4 -q -F " + image_, &out)) {
      error_ = "cannot make the file system: " + out;
      return;
    }
    if (!Shell(mount_at_ + " sh -c 'mkdir -p " + mount_ + " && mount -o loop" +
                   (options.empty() ? "" : "," + options) + " " + image_ + " " + mount_ +
                   " && findmnt -n -o SOURCE " + mount_ + "'",
               &out)) {
      error_ = "cannot mount " + image_ + " at " + mount_ + ": " + out;
      return;
    }
    device_ = out.substr(0, out.find('\n'));
  }
  ~LoopDisk() {
    std::string out;
    // -l: a file system whose disk failed may still be busy; the loop device goes with it.
    if (!device_.empty()) Shell(mount_at_ + " umount -l " + mount_, &out);
    if (!image_.empty()) std::filesystem::remove(image_);
  }
  LoopDisk(const LoopDisk&) = delete;
  LoopDisk& operator=(const LoopDisk&) = delete;

  const std::string& error() const { return error_; }
  // Where the file system is mounted, and its device (/dev/loopN).
  const std::string& path() const { return mount_; }
  const std::string& device() const { return device_; }
  // The disk is gone: every I/O to it fails from now on. False (with error()) if it could not be.
  bool Fail() {
    std::string out;
    if (Shell("truncate -s 0 " + image_ + " && losetup -c " + device_, &out)) return true;
    error_ = "cannot take " + device_ + " away: " + out;
    return false;
  }

 private:
  // Runs `command` in sh: its output (stdout and stderr) in *out; whether it succeeded.
  static bool Shell(const std::string& command, std::string* out) {
    int status = 0;
    *out = test::RunShell(command, &status);
    return status == 0;
  }
  std::string image_, mount_, mount_at_, device_, error_;
};

}  // namespace dtrain::testing
