// CpuCgroup: a CPU cgroup with a quota for one test (the v1 or the v2 hierarchy, whichever this
// machine has), the processes moved into it throttled by the kernel's CFS bandwidth control as a
// node throttled for heat or power is; moved back out and removed with it. Needs root.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/files.h"

namespace dtrain::testing {

class CpuCgroup {
 public:
  // `share`: the share of one CPU the cgroup's processes get together (0.1: 10 ms in 100 ms).
  // `period_us`: the CFS period the quota is given in; a shorter one throttles short bursts too
  // (one of under 10 ms fits in a 100 ms period's 10 ms).
  CpuCgroup(const std::string& name, double share, long long period_us = 100000) {
    if (::geteuid() != 0) {
      error_ = "needs root (a CPU cgroup)";
      return;
    }
    const bool v1 = std::filesystem::exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us");
    const bool v2 =
        !v1 && std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers") &&
        ReadFile("/sys/fs/cgroup/cgroup.subtree_control").find("cpu") != std::string::npos;
    if (!v1 && !v2) {
      error_ = "no CPU cgroup controller (neither /sys/fs/cgroup/cpu nor cgroup v2 with cpu)";
      return;
    }
    parent_ = v1 ? "/sys/fs/cgroup/cpu" : "/sys/fs/cgroup";
    path_ = parent_ + "/" + name;
    std::error_code ec;
    std::filesystem::create_directory(path_, ec);
    if (ec) {
      error_ = "cannot make the CPU cgroup " + path_ + ": " + ec.message();
      path_.clear();
      return;
    }
    const std::string quota = std::to_string(static_cast<long long>(share * period_us));
    if (v1) {
      Write("cpu.cfs_period_us", std::to_string(period_us));
      Write("cpu.cfs_quota_us", quota);
    } else {
      Write("cpu.max", quota + " " + std::to_string(period_us));
    }
  }
  ~CpuCgroup() {
    if (path_.empty()) return;
    std::istringstream procs(ReadFile(path_ + "/cgroup.procs"));
    for (std::string pid; std::getline(procs, pid);) {
      std::ofstream(parent_ + "/cgroup.procs") << pid;
    }
    ::rmdir(path_.c_str());
  }
  const std::string& error() const { return error_; }
  // Moves process `pid` (all its threads) into the cgroup; false if the kernel refused.
  bool Move(const std::string& pid) const { return WriteKernelFile(path_ + "/cgroup.procs", pid); }

 private:
  void Write(const std::string& file, const std::string& value) {
    if (!WriteKernelFile(path_ + "/" + file, value)) error_ = "cannot write " + path_ + "/" + file;
  }
  std::string parent_, path_, error_;
};

}  // namespace dtrain::testing
