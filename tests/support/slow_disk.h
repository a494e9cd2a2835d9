// SlowDisk: a disk that writes slowly, as a node's worn or shared disk does. An ext4 file system
// on a loop device over a sparse file, mounted for one test, and a block I/O cgroup (v1 blkio or
// v2 io, whichever this machine has) whose processes the kernel lets write to that device at
// `bytes_per_s` only: fsync waits for the throttled writes. Processes moved into it, unmounted and
// removed with it. Needs root, losetup and mkfs.ext4.
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "tests/support/files.h"
#include "tests/support/popen_shell.h"

namespace dtrain::testing {

class SlowDisk {
 public:
  // `dir`: a scratch folder for the image and the mount point; `name`: the cgroup's.
  SlowDisk(const std::string& dir, const std::string& name, long long bytes_per_s) {
    if (::geteuid() != 0) {
      error_ = "needs root (a loop device, a mount, a block I/O cgroup)";
      return;
    }
    const bool v1 = std::filesystem::exists("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device");
    const bool v2 =
        !v1 && ReadFile("/sys/fs/cgroup/cgroup.subtree_control").find("io") != std::string::npos;
    if (!v1 && !v2) {
      error_ = "no block I/O cgroup controller (neither v1 blkio nor v2 io)";
      return;
    }
    image_ = dir + "/disk.img";
    mount_ = dir + "/mnt";
    std::filesystem::create_directories(mount_);
    std::string out;
    if (!Shell("truncate -s 256M " + image_, &out) || !Shell("losetup -f --show " + image_, &out)) {
      error_ = "cannot make a loop device: " + out;
      return;
    }
    loop_ = out.substr(0, out.find('\n'));
    struct stat st {};
    if (::stat(loop_.c_str(), &st) != 0) {
      error_ = "no " + loop_;
      return;
    }
    const std::string device =
        std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    if (!Shell("mkfs.ext4 -q -F " + loop_ + " && mount " + loop_ + " " + mount_, &out)) {
      error_ = "cannot make or mount the file system: " + out;
      return;
    }
    mounted_ = true;
    parent_ = v1 ? "/sys/fs/cgroup/blkio" : "/sys/fs/cgroup";
    cgroup_ = parent_ + "/" + name;
    std::error_code ec;
    std::filesystem::create_directory(cgroup_, ec);
    const std::string rate = std::to_string(bytes_per_s);
    const bool limited =
        !ec &&
        (v1 ? WriteKernelFile(cgroup_ + "/blkio.throttle.write_bps_device", device + " " + rate)
            : WriteKernelFile(cgroup_ + "/io.max", device + " wbps=" + rate));
    if (!limited) error_ = "cannot limit writes to " + loop_ + " in " + cgroup_;
  }
  ~SlowDisk() {
    if (!cgroup_.empty()) {
      std::istringstream procs(ReadFile(cgroup_ + "/cgroup.procs"));
      for (std::string pid; std::getline(procs, pid);)
        WriteKernelFile(parent_ + "/cgroup.procs", pid);
      ::rmdir(cgroup_.c_str());
    }
    std::string out;
    if (mounted_) Shell("umount " + mount_, &out);
    if (!loop_.empty()) Shell("losetup -d " + loop_, &out);
    std::filesystem::remove(image_);
  }
  const std::string& error() const { return error_; }
  // Where the slow file system is mounted.
  const std::string& path() const { return mount_; }
  // Moves process `pid` (all its threads) into the cgroup; false if the kernel refused.
  bool Move(int pid) const {
    return WriteKernelFile(cgroup_ + "/cgroup.procs", std::to_string(pid));
  }

 private:
  // Runs `command` in sh: its output (stdout and stderr) in *out; whether it succeeded.
  static bool Shell(const std::string& command, std::string* out) {
    int status = 0;
    *out = test::RunShell(command, &status);
    return status == 0;
  }
  std::string image_, mount_, loop_, parent_, cgroup_, error_;
  bool mounted_ = false;
};

}  // namespace dtrain::testing
