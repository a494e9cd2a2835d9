// Local processes: each a Subprocess in its own process group, stdout and stderr on two pipes,
// stdin /dev/null or a pipe, its exact environment, and a guard left in the group that kills it
// all if dtrain dies outright (launcher/local/group_guard.h). Reading and reaping are one poll(2)
// loop.
#include "launcher/local/local_transport.h"

#include "launcher/local/group_guard.h"
#include "launcher/oom_kill.h"
#include "launcher/shm_leftovers.h"
#include "launcher/this_machine.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dtrain {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

void SetNonBlocking(int fd) {
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

// The spec's variables, with its PYTHONPATH head in front of the PYTHONPATH dtrain has.
EnvOverrides OverridesFor(const ProcessSpec& spec) {
  EnvOverrides env(spec.env.begin(), spec.env.end());
  if (!spec.python_path_head.empty()) {
    const auto set = env.find("PYTHONPATH");
    const char* inherited = std::getenv("PYTHONPATH");
    const std::string old = set != env.end() && set->second ? *set->second
                            : inherited                     ? inherited
                                                            : "";
    env["PYTHONPATH"] = old.empty() ? spec.python_path_head : spec.python_path_head + ":" + old;
  }
  return env;
}

int& StreamFd(LocalProcess& proc, OutputStream stream) {
  return stream == OutputStream::kStdout ? proc.child.out_fd : proc.child.err_fd;
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
  const std::string found = FindOnPath(name, path_env);
  if (!found.empty()) return found;
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
  procs_.clear();
  orphans_.KillAll();
  if (ranks_since_ > 0) {
    const std::string removed = RemoveShmLeftovers(ranks_since_);
    if (!removed.empty()) {
      std::fputs(removed.c_str(), stderr);
      std::fflush(stderr);
    }
  }
}

void LocalTransport::Start(const std::vector<ProcessSpec>& procs, TransportEvents& events) {
  orphans_.Adopt(procs);
  for (const ProcessSpec& spec : procs) {
    if (!spec.own_step && ranks_since_ == 0) ranks_since_ = std::time(nullptr);
  }
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
  SubprocessOptions options;
  options.argv = spec.argv;
  options.env = OverridesFor(spec);
  const std::vector<std::string> env = MergeEnvironment(options.env);
  const std::string path_env = EnvironmentValue(env, "PATH");
  const std::string argv0 = spec.argv.empty() ? "" : spec.argv[0];
  options.program = ResolveExecutable(argv0, path_env);
  if (options.program.empty()) {
    proc.status.error = argv0.empty()
                            ? "empty command"
                            : "'" + argv0 + "': command not found (PATH=" + path_env + ")";
    proc.status.not_found = !argv0.empty();
    return;
  }
  options.cwd = spec.cwd.empty() ? default_cwd_ : spec.cwd;
  options.in = spec.stdin_data.empty() ? Stdio::kNull : Stdio::kPipe;
  static std::atomic<int> started{0};
  if (EnvironmentValue(env, kRankCgroupSwitch) != "0") {
    proc.cgroup = RankCgroup(std::to_string(++started));
  }
  // PR_SET_PDEATHSIG fires when the forking *thread* ends, so it is only safe from the main one.
  const bool guard = ::gettid() == ::getpid();
  options.pre_exec = [launcher = ::getpid(), guard, procs = proc.cgroup.procs_file()] {
    JoinCgroup(procs.c_str());  // before the guard forks: the guard and the rank both in it
    if (guard) SplitIntoGuardAndRank(launcher);
  };
  const std::string error = proc.child.Start(options);
  if (!error.empty()) {
    proc.status.error = error;
    return;
  }
  proc.oom_kills_at_start = ReadOomKillCount();
  SetNonBlocking(proc.child.out_fd);
  SetNonBlocking(proc.child.err_fd);
  if (proc.child.in_fd >= 0) {
    proc.input = spec.stdin_data;
    SetNonBlocking(proc.child.in_fd);
    WriteInput(proc);
  }
}

void LocalTransport::WriteInput(LocalProcess& proc) {
  while (!proc.input.empty()) {
    ssize_t n = ::write(proc.child.in_fd, proc.input.data(), proc.input.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n < 0) break;  // EPIPE: the process stopped reading; what it did not take is dropped
    proc.input.erase(0, static_cast<size_t>(n));
  }
  Subprocess::Close(proc.child.in_fd);
  proc.input.clear();
}

void LocalTransport::ReadOutput(LocalProcess& proc, OutputStream stream, size_t budget,
                                TransportEvents& events) {
  int& fd = StreamFd(proc, stream);
  char buf[65536];
  size_t total = 0;
  while (fd >= 0 && total < budget) {
    const size_t n = Subprocess::Read(fd, buf, sizeof(buf));
    if (n == 0) return;  // nothing more now, or the end
    total += n;
    events.OnOutput(proc.id, stream, std::string_view(buf, n));
  }
}

void LocalTransport::ReadAllOutput(LocalProcess& proc, size_t budget, TransportEvents& events) {
  ReadOutput(proc, OutputStream::kStdout, budget, events);
  ReadOutput(proc, OutputStream::kStderr, budget, events);
}

void LocalTransport::Reap(LocalProcess& proc) {
  if (!proc.child.Done()) return;
  proc.reaped = true;
  proc.status = proc.child.status();
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
        if (StreamFd(proc, stream) < 0) continue;
        fds.push_back({StreamFd(proc, stream), POLLIN, 0});
        owners.push_back(&proc);
        streams.push_back(stream);
      }
      if (proc.child.in_fd >= 0) {
        fds.push_back({proc.child.in_fd, POLLOUT, 0});
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
          if (owners[i]->child.in_fd >= 0) WriteInput(*owners[i]);
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
        proc.child.Finish();  // closes the pipes: what the process's children add is not its
        ReportOomKill(proc, events);
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

void LocalTransport::ReportOomKill(LocalProcess& proc, TransportEvents& events) {
  if (proc.status.signal != SIGKILL || killed_ || proc.oom_kills_at_start < 0) return;
  const int64_t now = ReadOomKillCount();
  if (now <= proc.oom_kills_at_start) return;
  events.OnOutput(proc.id, OutputStream::kStderr,
                  // The pid dtrain knows is the rank's guard (group_guard.h), not the rank.
                  OomKillLine(ThisHostName(), proc.oom_kills_at_start, now, ReadKernelLogOomKill(0),
                              /*its_pid=*/false));
}

void LocalTransport::SignalAll(int sig) {
  if (sig == SIGKILL) killed_ = true;
  for (LocalProcess& proc : procs_) {
    // A descendant that left the group, the session and its environment is still in the cgroup.
    if (sig == SIGKILL) proc.cgroup.Kill();
    if (proc.child.pid() <= 0 || proc.group_gone) continue;
    // After the leader is reaped its group may still hold children; the group id cannot be
    // reused while any of them lives, so signalling it reaches only this job's processes.
    if (proc.child.SignalGroup(sig) != 0 && errno == ESRCH && proc.reaped) proc.group_gone = true;
    // A stopped rank would sit on SIGTERM until the grace period's SIGKILL.
    if (sig != SIGKILL && sig != SIGSTOP && !proc.group_gone) proc.child.SignalGroup(SIGCONT);
  }
}

std::unique_ptr<Transport> MakeLocalTransport(const ClusterSpec& spec) {
  return std::make_unique<LocalTransport>(spec.workdir);
}

}  // namespace dtrain
