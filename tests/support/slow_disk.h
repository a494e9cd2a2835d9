// SlowDisk: a disk that writes slowly, as a node's worn or shared disk does. A LoopDisk
// (loop_disk.h), and a block I/O cgroup (v1 blkio or v2 io, whichever this machine has) whose
// processes the kernel lets write to that device at `bytes_per_s` only: fsync waits for the
// throttled writes. Processes moved into it, unmounted and removed with it. Needs root, losetup
// and mkfs.ext4.
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "tests/support/files.h"
#include "tests/support/loop_disk.h"

namespace dtrain::testing {

class SlowDisk {
 public:
  // `dir`: a scratch folder for the image and the mount point; `name`: the cgroup's. `size`,
  // `mount_at` and `mount_point` as LoopDisk's (mount_at: a namespace node's own mount).
  SlowDisk(const std::string& dir, const std::string& name, long long bytes_per_s,
           const std::string& size = "256M", const std::string& mount_at = "",
           const std::string& mount_point = "")
      : disk_(dir, size, mount_at, mount_point) {
    if (!disk_.error().empty()) {
      error_ = disk_.error();
      return;
    }
    const bool v1 = std::filesystem::exists("/sys/fs/cgroup/blkio/blkio.throttle.write_bps_device");
    const bool v2 =
        !v1 && ReadFile("/sys/fs/cgroup/cgroup.subtree_control").find("io") != std::string::npos;
    if (!v1 && !v2) {
      error_ = "no block I/O cgroup controller (neither v1 blkio nor v2 io)";
      return;
    }
    struct stat st {};
    if (::stat(disk_.device().c_str(), &st) != 0) {
      error_ = "no " + disk_.device();
      return;
    }
    const std::string device =
        std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    parent_ = v1 ? "/sys/fs/cgroup/blkio" : "/sys/fs/cgroup";
    cgroup_ = parent_ + "/" + name;
    std::error_code ec;
    std::filesystem::create_directory(cgroup_, ec);
    const std::string rate = std::to_string(bytes_per_s);
    const bool limited =
        !ec &&
        (v1 ? WriteKernelFile(cgroup_ + "/blkio.throttle.write_bps_device", device + " " + rate)
            : WriteKernelFile(cgroup_ + "/io.max", device + " wbps=" + rate));
    if (!limited) error_ = "cannot limit writes to " + disk_.device() + " in " + cgroup_;
  }
  ~SlowDisk() {
    if (cgroup_.empty()) return;
    std::istringstream procs(ReadFile(cgroup_ + "/cgroup.procs"));
    for (std::string pid; std::getline(procs, pid);)
      WriteKernelFile(parent_ + "/cgroup.procs", pid);
    ::rmdir(cgroup_.c_str());
  }
  const std::string& error() const { return error_; }
  // Where the slow file system is mounted.
  const std::string& path() const { return disk_.path(); }
  // A shell prefix that moves the shell into the cgroup and then runs the command after it there.
  std::string Within() const { return "echo $$ >" + cgroup_ + "/cgroup.procs && exec "; }
  // Moves process `pid` (all its threads) into the cgroup; false if the kernel refused.
  bool Move(int pid) const {
    return WriteKernelFile(cgroup_ + "/cgroup.procs", std::to_string(pid));
  }

 private:
  LoopDisk disk_;  // unmounted after the cgroup is gone (members go after the destructor's body)
  std::string parent_, cgroup_, error_;
};

}  // namespace dtrain::testing
