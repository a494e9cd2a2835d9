// Test support for running the built dtrain binary as a real process: start it with output in
// files, wait with a deadline, signal it, and find processes left behind by a job (any process
// whose environment carries DTRAIN_JOB=<job>).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace dtrain::testing {

inline std::string DtrainPath() {
  return std::string(DTRAIN_BINARY_DIR) + "/dtrain";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh directory under /tmp, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/dtrain-test-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A dtrain process started in `cwd`, stdout and stderr captured in files there.
class DtrainProcess {
 public:
  DtrainProcess(const std::vector<std::string>& args, const std::string& cwd,
                const std::vector<std::string>& env = {})
      : cwd_(cwd) {
    static int counter = 0;
    const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
    out_path_ = cwd + "/.stdout-" + tag;
    err_path_ = cwd + "/.stderr-" + tag;
    start_ = std::chrono::steady_clock::now();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);  // like a shell job: a signal to dtrain alone, not to the test
      if (::chdir(cwd.c_str()) != 0) ::_exit(126);
      int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(out, 1);
      ::dup2(err, 2);
      for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
      std::vector<std::string> argv_storage = {DtrainPath()};
      argv_storage.insert(argv_storage.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : argv_storage) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~DtrainProcess() {
    if (pid_ > 0 && status_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  int pid() const { return pid_; }
  void Signal(int sig) { ::kill(pid_, sig); }

  // dtrain's exit status as a shell reports it; -1 if it did not end within `timeout_s`.
  int Wait(double timeout_s = 60) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (status_ < 0) {
      int raw = 0;
      if (::waitpid(pid_, &raw, WNOHANG) == pid_) {
        status_ = WIFSIGNALED(raw) ? 128 + WTERMSIG(raw) : WEXITSTATUS(raw);
        seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
  }
  double seconds() const { return seconds_; }
  std::string out() const { return ReadFile(out_path_); }
  std::string err() const { return ReadFile(err_path_); }

 private:
  std::string cwd_;
  std::string out_path_;
  std::string err_path_;
  std::chrono::steady_clock::time_point start_;
  int pid_ = -1;
  int status_ = -1;
  double seconds_ = 0;
};

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
    const std::string base = std::string("/proc/") + entry->d_name;
    std::string stat = ReadFile(base + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') continue;
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

// Waits until `predicate` holds (true) or `timeout_s` passes (false).
template <class Predicate>
bool WaitFor(Predicate predicate, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace dtrain::testing
