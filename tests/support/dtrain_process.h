// Test support for running the built dtrain binary as a real process (a Subprocess): start it
// with output in files, wait with a deadline, signal it, and find processes left behind by a
// job (any process whose environment carries DTRAIN_JOB=<job>).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "launcher/subprocess.h"
#include "tests/support/files.h"
#include "tests/support/process_state.h"
#include "tests/support/test_paths.h"
#include "tests/support/wait_for.h"

namespace dtrain::testing {

inline std::string DtrainPath() {
  return std::string(DTRAIN_BINARY_DIR) + "/dtrain";
}

// A dtrain process started in `cwd`, stdout and stderr captured in files there.
class DtrainProcess {
 public:
  // `env`: "NAME=value" entries set on top of the test's environment.
  DtrainProcess(const std::vector<std::string>& args, const std::string& cwd,
                const std::vector<std::string>& env = {}) {
    static int counter = 0;
    const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
    SubprocessOptions options;
    options.argv = {DtrainPath()};
    options.argv.insert(options.argv.end(), args.begin(), args.end());
    for (const std::string& entry : env) {
      options.env[entry.substr(0, entry.find('='))] = entry.substr(entry.find('=') + 1);
    }
    options.cwd = cwd;
    options.out = options.err = Stdio::kFile;  // like a shell job: in its own process group
    options.out_file = out_path_ = cwd + "/.stdout-" + tag;
    options.err_file = err_path_ = cwd + "/.stderr-" + tag;
    start_ = std::chrono::steady_clock::now();
    const std::string error = process_.Start(options);
    if (!error.empty()) WriteFile(err_path_, error);
  }

  int pid() const { return process_.pid(); }
  void Signal(int sig) { process_.Signal(sig); }
  bool running() { return !process_.Done(); }  // Wait() still gives its status after it ended

  // dtrain's exit status as a shell reports it; -1 if it did not end within `timeout_s`.
  int Wait(double timeout_s = 60) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (status_ < 0) {
      if (process_.pid() < 0) return status_ = 127;  // it could not start
      if (process_.Done()) {
        status_ = process_.status().ShellStatus();
        seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
  }
  double seconds() const { return seconds_; }
  const ExitStatus& exit_status() const { return process_.status(); }  // once Wait() returned
  std::string out() const { return ReadFile(out_path_); }
  std::string err() const { return ReadFile(err_path_); }

 private:
  Subprocess process_;  // killed with its group and reaped if the test ends first
  std::string out_path_;
  std::string err_path_;
  std::chrono::steady_clock::time_point start_;
  int status_ = -1;
  double seconds_ = 0;
};

// Seconds since `start`.
inline double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Waits (at most `timeout_s`) for `text` on dtrain's stderr; the seconds since `start` it took,
// -1 if it never came.
inline double WaitForText(const DtrainProcess& dtrain, const std::string& text,
                          std::chrono::steady_clock::time_point start, double timeout_s) {
  while (Since(start) < timeout_s) {
    if (dtrain.err().find(text) != std::string::npos) return Since(start);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Runs dtrain to the end (at most `timeout_s`).
struct DtrainRun {
  int status = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};
inline DtrainRun RunDtrain(const std::vector<std::string>& args, const std::string& cwd,
                           const std::vector<std::string>& env = {}, double timeout_s = 60) {
  DtrainProcess p(args, cwd, env);
  DtrainRun run;
  run.status = p.Wait(timeout_s);
  run.out = p.out();
  run.err = p.err();
  run.seconds = p.seconds();
  return run;
}

// Pids of live (non-zombie) processes whose environment holds `needle` as a whole entry.
inline std::vector<int> ProcessesWithEnv(const std::string& needle) {
  std::vector<int> pids;
  DIR* proc = ::opendir("/proc");
  while (dirent* entry = proc ? ::readdir(proc) : nullptr) {
    const int pid = std::atoi(entry->d_name);
    if (pid <= 0) continue;
    const char state = ProcessState(pid);
    if (state == 0 || state == 'Z') continue;
    const std::string base = std::string("/proc/") + entry->d_name;
    const std::string env = ReadFile(base + "/environ");
    size_t at = 0;
    while ((at = env.find(needle, at)) != std::string::npos) {
      if ((at == 0 || env[at - 1] == '\0') &&
          (at + needle.size() == env.size() || env[at + needle.size()] == '\0')) {
        pids.push_back(pid);
        break;
      }
      at += needle.size();
    }
  }
  if (proc) ::closedir(proc);
  return pids;
}

}  // namespace dtrain::testing
