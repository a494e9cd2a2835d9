// Local processes through Boost.Process: a handler puts each child in its own process group,
// wires its stdout and stderr to two pipes and stdin to /dev/null or a pipe, sets its exact
// environment, and leaves a guard in the group that kills it all if dtrain dies outright
// (launcher/group_guard.h). Reading and reaping are plain poll(2) and waitpid(2).
#include "launcher/local_transport.h"

#include "launcher/group_guard.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <boost/process/args.hpp>
#include <boost/process/child.hpp>
#include <boost/process/exe.hpp>
#include <boost/process/extend.hpp>

extern char** environ;

namespace dtrain {
namespace {

namespace bp = boost::process;

// The child's side of the launch, prepared before fork so the child only calls async-signal-safe
// functions: argv and envp as C arrays, the fds to install, the directory to enter.
struct ChildSetup : bp::extend::handler {
  const std::vector<std::string>* argv_storage = nullptr;
  std::vector<char*> argv;
  std::vector<std::string> env_storage;
  std::vector<char*> envp;
  int input_fd = -1;
  int output_fd = -1;
  int error_fd = -1;
  std::string cwd;
  int* failed_pid = nullptr;  // a child that could not exec, so the parent can reap it
  // PR_SET_PDEATHSIG fires when the forking *thread* ends, so it is only safe from the main one.
  bool die_with_parent = false;
  pid_t launcher_pid = 0;

  template <class Executor>
  void on_setup(Executor& exec) {
    exec.cmd_line = argv.data();
    exec.env = envp.data();
  }

  template <class Executor>
  void on_exec_setup(Executor& exec) {
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGCHLD}) ::signal(sig, SIG_DFL);
    ::dup2(input_fd, 0);
    ::dup2(output_fd, 1);
    ::dup2(error_fd, 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      exec.set_error(std::error_code(errno, std::system_category()), "cannot enter " + cwd);
      ::_exit(127);
    }
    if (die_with_parent) SplitIntoGuardAndRank(launcher_pid);  // dtrain killed outright
  }

  template <class Executor>
  void on_error(Executor& exec, const std::error_code&) {
    if (failed_pid && exec.pid > 0) *failed_pid = exec.pid;
  }
};

std::vector<std::string> MergedEnvironment(const ProcessSpec& spec) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, eq - *e)] = eq + 1;
  }
  for (const auto& [name, value] : spec.env) env[name] = value;
  if (!spec.python_path_head.empty()) {
    auto old = env.find("PYTHONPATH");
    const bool keep = old != env.end() && !old->second.empty();
    env["PYTHONPATH"] = keep ? spec.python_path_head + ":" + old->second : spec.python_path_head;
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void SetNonBlocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

ExitStatus StatusFromWait(int raw) {
  ExitStatus status;
  if (WIFSIGNALED(raw)) {
    status.signal = WTERMSIG(raw);
  } else {
    status.code = WEXITSTATUS(raw);
  }
  return status;
}

}  // namespace

std::string SelfExecutableDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, n);
  return path.substr(0, path.rfind('/'));
}

std::string ResolveExecutable(const std::string& name, const std::string& path_env) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  const bool own = name == "dtrain" || name.rfind("dtrain-", 0) == 0;
  if (own) {
    std::string beside = SelfExecutableDir() + "/" + name;
    if (IsExecutableFile(beside)) return beside;
  }
  std::stringstream dirs(path_env);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (IsExecutableFile(candidate)) return candidate;
  }
  if (own) {  // the rest of templates/dtrain_program.sh's list
    const char* home = std::getenv("HOME");
    for (std::string dir : {std::string("/usr/local/bin"), std::string("/usr/bin"),
                            std::string(home ? home : "") + "/.local/bin"}) {
      if (IsExecutableFile(dir + "/" + name)) return dir + "/" + name;
    }
  }
  return "";
}

LocalTransport::LocalTransport(std::string default_cwd) : default_cwd_(std::move(default_cwd)) {}

LocalTransport::~LocalTransport() {
  for (LocalProcess& proc : procs_) {
    if (proc.pid > 0 && !proc.reaped) {
      ::kill(-proc.pid, SIGKILL);
      int raw = 0;
      while (::waitpid(proc.pid, &raw, 0) < 0 && errno == EINTR) {
      }
    }
    for (int fd : proc.output_fd) {
      if (fd >= 0) ::close(fd);
    }
    if (proc.input_fd >= 0) ::close(proc.input_fd);
  }
  orphans_.KillAll();
}

void LocalTransport::Start(const std::vector<ProcessSpec>& procs, TransportEvents& events) {
  orphans_.Adopt(procs);
  for (const ProcessSpec& spec : procs) {
    procs_.emplace_back();
    LocalProcess& proc = procs_.back();
    proc.id = spec.id;
    Spawn(spec, proc);
    if (!proc.status.error.empty()) {
      proc.reaped = proc.group_gone = proc.reported = true;
      events.OnExit(proc.id, proc.status);
    }
  }
}

void LocalTransport::Spawn(const ProcessSpec& spec, LocalProcess& proc) {
  ChildSetup setup;
  setup.env_storage = MergedEnvironment(spec);
  std::string path_env;
  for (const std::string& entry : setup.env_storage) {
    if (entry.rfind("PATH=", 0) == 0) path_env = entry.substr(5);
  }
  const std::string argv0 = spec.argv.empty() ? "" : spec.argv[0];
  const std::string exe = ResolveExecutable(argv0, path_env);
  if (exe.empty()) {
    proc.status.error = argv0.empty()
                            ? "empty command"
                            : "'" + argv0 + "': command not found (PATH=" + path_env + ")";
    proc.status.not_found = !argv0.empty();
    return;
  }
  for (std::string& entry : setup.env_storage) setup.envp.push_back(entry.data());
  setup.envp.push_back(nullptr);
  std::vector<std::string> argv = spec.argv;
  for (std::string& arg : argv) setup.argv.push_back(arg.data());
  setup.argv.push_back(nullptr);
  setup.cwd = spec.cwd.empty() ? default_cwd_ : spec.cwd;
  setup.die_with_parent = ::gettid() == ::getpid();
  setup.launcher_pid = ::getpid();

  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    proc.status.error = std::string("pipe: ") + std::strerror(errno);
    return;
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    proc.status.error = std::string("pipe: ") + std::strerror(errno);
    ::close(out[0]);
    ::close(out[1]);
    return;
  }
  int in[2] = {-1, -1};
  if (spec.stdin_data.empty()) {
    in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  } else if (::pipe2(in, O_CLOEXEC) != 0) {
    in[0] = in[1] = -1;
  }
  if (in[0] < 0) {
    proc.status.error = std::string("stdin: ") + std::strerror(errno);
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return;
  }
  setup.output_fd = out[1];
  setup.error_fd = err[1];
  setup.input_fd = in[0];
  int failed_pid = -1;
  setup.failed_pid = &failed_pid;
  try {
    bp::child child(bp::exe = exe, setup);
    proc.pid = child.id();
    child.detach();  // reaped with waitpid below, not by Boost
  } catch (const std::exception& e) {
    proc.status.error = "'" + exe + "': " + e.what();
    if (failed_pid > 0) ::waitpid(failed_pid, nullptr, 0);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::close(in[0]);
  if (proc.pid <= 0) {
    ::close(out[0]);
    ::close(err[0]);
    if (in[1] >= 0) ::close(in[1]);
    return;
  }
  ::setpgid(proc.pid, proc.pid);  // also from this side, so no signal can race the child's call
  proc.output_fd[static_cast<int>(OutputStream::kStdout)] = out[0];
  proc.output_fd[static_cast<int>(OutputStream::kStderr)] = err[0];
  SetNonBlocking(out[0]);
  SetNonBlocking(err[0]);
  if (in[1] >= 0) {
    proc.input_fd = in[1];
    proc.input = spec.stdin_data;
    SetNonBlocking(proc.input_fd);
    WriteInput(proc);
  }
}

void LocalTransport::WriteInput(LocalProcess& proc) {
  while (!proc.input.empty()) {
    ssize_t n = ::write(proc.input_fd, proc.input.data(), proc.input.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n < 0) break;  // EPIPE: the process stopped reading; what it did not take is dropped
    proc.input.erase(0, static_cast<size_t>(n));
  }
  ::close(proc.input_fd);
  proc.input_fd = -1;
  proc.input.clear();
}

void LocalTransport::ReadOutput(LocalProcess& proc, OutputStream stream, size_t budget,
                                TransportEvents& events) {
  int& fd = proc.output_fd[static_cast<int>(stream)];
  char buf[65536];
  size_t total = 0;
  while (fd >= 0 && total < budget) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // end of file, or an error that ends the stream just the same
      ::close(fd);
      fd = -1;
      return;
    }
    total += static_cast<size_t>(n);
    events.OnOutput(proc.id, stream, std::string_view(buf, static_cast<size_t>(n)));
  }
}

void LocalTransport::ReadAllOutput(LocalProcess& proc, size_t budget, TransportEvents& events) {
  ReadOutput(proc, OutputStream::kStdout, budget, events);
  ReadOutput(proc, OutputStream::kStderr, budget, events);
}

void LocalTransport::Reap(LocalProcess& proc) {
  int raw = 0;
  pid_t r = ::waitpid(proc.pid, &raw, WNOHANG);
  if (r == proc.pid) {
    proc.reaped = true;
    proc.status = StatusFromWait(raw);
  } else if (r < 0 && errno == ECHILD) {
    proc.reaped = true;
    proc.status.error = "lost track of process " + std::to_string(proc.pid);
  }
}

bool LocalTransport::Poll(int timeout_ms, TransportEvents& events) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  constexpr size_t kReadBudget = 1 << 20;  // per process per pass, so one chatty rank can't starve
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<LocalProcess*> owners;
    std::vector<OutputStream> streams;
    for (LocalProcess& proc : procs_) {
      for (OutputStream stream : {OutputStream::kStdout, OutputStream::kStderr}) {
        if (proc.output_fd[static_cast<int>(stream)] < 0) continue;
        fds.push_back({proc.output_fd[static_cast<int>(stream)], POLLIN, 0});
        owners.push_back(&proc);
        streams.push_back(stream);
      }
      if (proc.input_fd >= 0) {
        fds.push_back({proc.input_fd, POLLOUT, 0});
        owners.push_back(&proc);
        streams.push_back(OutputStream::kStdout);
      }
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    // Short slices: a process whose pipe a grandchild keeps open ends without a wake-up.
    int wait_ms = static_cast<int>(std::max<long long>(0, std::min<long long>(left.count(), 50)));
    int ready = ::poll(fds.data(), fds.size(), wait_ms);
    bool delivered = false;
    if (ready > 0) {
      for (size_t i = 0; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        if (fds[i].events & POLLOUT) {
          if (owners[i]->input_fd >= 0) WriteInput(*owners[i]);
        } else {
          ReadOutput(*owners[i], streams[i], kReadBudget, events);
          delivered = true;
        }
      }
    }
    bool all_reported = true;
    for (LocalProcess& proc : procs_) {
      if (proc.reported) continue;
      if (!proc.reaped) Reap(proc);
      if (proc.reaped) {
        // Everything the process wrote is in the pipe now; take it, not what its children add.
        ReadAllOutput(proc, kReadBudget * 64, events);
        for (int& fd : proc.output_fd) {
          if (fd >= 0) ::close(fd);
          fd = -1;
        }
        if (proc.input_fd >= 0) ::close(proc.input_fd);
        proc.input_fd = -1;
        proc.reported = true;
        events.OnExit(proc.id, proc.status);
        delivered = true;
      } else {
        all_reported = false;
      }
    }
    if (all_reported) return false;
    if (delivered || Clock::now() >= deadline) return true;
  }
}

void LocalTransport::SignalAll(int sig) {
  for (LocalProcess& proc : procs_) {
    if (proc.pid <= 0 || proc.group_gone) continue;
    // After the leader is reaped its group may still hold children; the group id cannot be
    // reused while any of them lives, so signalling it reaches only this job's processes.
    if (::kill(-proc.pid, sig) != 0 && errno == ESRCH && proc.reaped) proc.group_gone = true;
    if (sig != SIGKILL && sig != SIGSTOP && !proc.group_gone) ::kill(-proc.pid, SIGCONT);
  }
}

std::unique_ptr<Transport> MakeLocalTransport(const ClusterSpec& spec) {
  return std::make_unique<LocalTransport>(spec.workdir);
}

}  // namespace dtrain
