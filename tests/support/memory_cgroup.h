// MemoryCgroup: a memory cgroup with a limit for one test, removed with it (the v1 or the v2
// hierarchy, whichever this machine has), and a rank command that overruns it: the kernel's OOM
// killer for real. Needs root.
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"

namespace dtrain::testing {

class MemoryCgroup {
 public:
  MemoryCgroup(const std::string& name, long long bytes) {
    if (::geteuid() != 0) {
      error_ = "needs root (a memory cgroup)";
      return;
    }
    const bool v1 = std::filesystem::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes") ||
                    std::filesystem::is_directory("/sys/fs/cgroup/memory");
    path_ = (v1 ? "/sys/fs/cgroup/memory/" : "/sys/fs/cgroup/") + name;
    std::error_code ec;
    std::filesystem::create_directory(path_, ec);
    if (ec) {
      error_ = "cannot make the memory cgroup " + path_ + ": " + ec.message();
      return;
    }
    const std::string limit = std::to_string(bytes);
    if (v1) {
      Write("memory.limit_in_bytes", limit);
      if (std::filesystem::exists(path_ + "/memory.memsw.limit_in_bytes"))
        Write("memory.memsw.limit_in_bytes", limit);
    } else {
      Write("memory.max", limit);
      if (std::filesystem::exists(path_ + "/memory.swap.max")) Write("memory.swap.max", "0");
    }
  }
  ~MemoryCgroup() {
    if (!path_.empty()) ::rmdir(path_.c_str());
  }
  const std::string& error() const { return error_; }
  // A shell command that writes its pid to `dir`/pid, waits for `dir`/go, then becomes a Python
  // that allocates 400 MiB; Run() moves it into the cgroup in between. (An SSH node runs in a
  // mount namespace of its own, with a /sys that does not show this cgroup.)
  static std::string Overrun(const std::string& dir) {
    return "echo $$ > " + dir + "/pid; while [ ! -e " + dir +
           "/go ]; do sleep 0.05; done; exec python3 -c 'b = bytearray(400 << 20); print(len(b))'";
  }
  // dtrain with `args`, the rank moved into this cgroup as soon as it wrote its pid.
  DtrainRun Run(const std::vector<std::string>& args, const std::string& dir) const {
    DtrainProcess dtrain(args, dir);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (ReadFile(dir + "/pid").empty() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::ofstream(path_ + "/cgroup.procs") << ReadFile(dir + "/pid");
    std::ofstream(dir + "/go") << "";
    DtrainRun run;
    run.status = dtrain.Wait(90);
    run.out = dtrain.out();
    run.err = dtrain.err();
    return run;
  }

 private:
  void Write(const std::string& file, const std::string& value) {
    if (!WriteKernelFile(path_ + "/" + file, value)) error_ = "cannot write " + path_ + "/" + file;
  }
  std::string path_, error_;
};

#define REQUIRE_CGROUP(c)                            \
  if (!(c).error().empty()) {                        \
    if (geteuid() != 0) GTEST_SKIP() << (c).error(); \
    FAIL() << (c).error();                           \
  }

}  // namespace dtrain::testing
