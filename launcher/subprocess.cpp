// fork + exec with an error pipe: everything the child needs (argv, envp, the program's path,
// the descriptors) is prepared before fork, so the child makes only async-signal-safe calls;
// a failure to enter the directory or to exec comes back through a close-on-exec pipe.
#include "launcher/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <utility>

#include <fmt/format.h>

extern char** environ;

namespace dtrain {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// What the child reports through the error pipe when it cannot go on.
struct ChildFailure {
  int step = 0;  // kEnterDirectory or kExec
  int error = 0;
};
constexpr int kEnterDirectory = 1;
constexpr int kExec = 2;

[[noreturn]] void FailInChild(int pipe_fd, int step) {
  const ChildFailure failure{step, errno};
  const ssize_t n = ::write(pipe_fd, &failure, sizeof failure);
  (void)n;
  ::_exit(127);
}

// The descriptor one stream of the child gets, opened in the parent; `mine` is the pipe end
// the parent keeps (or -1). Returns "" or why it could not be opened.
std::string OpenStream(Stdio kind, bool is_input, const std::string& file, int& child_fd,
                       int& mine) {
  child_fd = mine = -1;
  switch (kind) {
    case Stdio::kInherit:
      return "";
    case Stdio::kNull:
      child_fd = ::open("/dev/null", (is_input ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
      break;
    case Stdio::kFile:
      child_fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (child_fd < 0) return fmt::format("cannot open {}: {}", file, std::strerror(errno));
      return "";
    case Stdio::kPipe: {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) return fmt::format("pipe: {}", std::strerror(errno));
      child_fd = is_input ? fds[0] : fds[1];
      mine = is_input ? fds[1] : fds[0];
      return "";
    }
  }
  return child_fd < 0 ? fmt::format("/dev/null: {}", std::strerror(errno)) : "";
}

}  // namespace

std::vector<std::string> MergeEnvironment(const EnvOverrides& overrides) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) env[std::string(*e, eq - *e)] = eq + 1;
  }
  for (const auto& [name, value] : overrides) {
    if (value) {
      env[name] = *value;
    } else {
      env.erase(name);
    }
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::string EnvironmentValue(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& entry : env) {
    if (entry.size() > name.size() && entry[name.size()] == '=' && entry.rfind(name, 0) == 0) {
      return entry.substr(name.size() + 1);
    }
  }
  return "";
}

std::string FindOnPath(const std::string& name, const std::string& path_env) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return name;
  std::stringstream dirs(path_env);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (IsExecutableFile(candidate)) return candidate;
  }
  return "";
}

Subprocess::Subprocess(Subprocess&& other) noexcept {
  *this = std::move(other);
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this == &other) return *this;
  Release();
  in_fd = std::exchange(other.in_fd, -1);
  out_fd = std::exchange(other.out_fd, -1);
  err_fd = std::exchange(other.err_fd, -1);
  pid_ = std::exchange(other.pid_, -1);
  reaped_ = std::exchange(other.reaped_, false);
  status_ = std::move(other.status_);
  return *this;
}

Subprocess::~Subprocess() {
  Release();
}

void Subprocess::Release() {
  if (running()) {
    SignalGroup(SIGKILL);
    Finish();
  }
  CloseAll();
  pid_ = -1;
}

void Subprocess::Close(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void Subprocess::CloseAll() {
  Close(in_fd);
  Close(out_fd);
  Close(err_fd);
}

size_t Subprocess::Read(int& fd, char* buffer, size_t size) {
  for (;;) {
    const ssize_t n = ::read(fd, buffer, size);
    if (n > 0) return static_cast<size_t>(n);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return 0;
    Close(fd);  // end of file, or an error that ends the stream just the same
    return 0;
  }
}

std::string Subprocess::Start(const SubprocessOptions& options) {
  if (options.argv.empty()) return "empty command";
  std::vector<std::string> env = MergeEnvironment(options.env);
  const std::string program = !options.program.empty()
                                  ? options.program
                                  : FindOnPath(options.argv[0], EnvironmentValue(env, "PATH"));
  if (program.empty())
    return fmt::format("cannot run {}: {}", options.argv[0], std::strerror(ENOENT));

  std::vector<char*> argv, envp;
  std::vector<std::string> argv_storage = options.argv;
  for (std::string& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (std::string& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);

  int child_fd[3] = {-1, -1, -1};
  int* mine[3] = {&in_fd, &out_fd, &err_fd};
  const Stdio kinds[3] = {options.in, options.out, options.err};
  const std::string files[3] = {"", options.out_file, options.err_file};
  int failure_pipe[2] = {-1, -1};
  auto close_child_side = [&] {
    for (int& fd : child_fd) Close(fd);
    Close(failure_pipe[0]);
    Close(failure_pipe[1]);
  };
  std::string error;
  for (int s = 0; s < 3 && error.empty(); ++s) {
    error = OpenStream(kinds[s], s == 0, files[s], child_fd[s], *mine[s]);
  }
  if (error.empty() && ::pipe2(failure_pipe, O_CLOEXEC) != 0) {
    error = fmt::format("pipe: {}", std::strerror(errno));
  }
  if (!error.empty()) {
    close_child_side();
    CloseAll();
    return error;
  }

  const char* cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
    for (int s = 0; s < 3; ++s) {
      if (child_fd[s] >= 0) ::dup2(child_fd[s], s);  // dup2 clears close-on-exec on the copy
    }
    // Nothing else of dtrain's reaches the program: libssh opens its sockets without
    // close-on-exec, and an open SSH connection must not outlive dtrain in a child.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (cwd && ::chdir(cwd) != 0) FailInChild(failure_pipe[1], kEnterDirectory);
    if (options.pre_exec) options.pre_exec();
    ::execve(program.c_str(), argv.data(), envp.data());
    FailInChild(failure_pipe[1], kExec);
  }
  const int fork_errno = errno;
  for (int& fd : child_fd) Close(fd);
  Close(failure_pipe[1]);
  if (pid < 0) {
    Close(failure_pipe[0]);
    CloseAll();
    return fmt::format("fork: {}", std::strerror(fork_errno));
  }
  pid_ = pid;
  reaped_ = false;
  status_ = ExitStatus();
  ::setpgid(pid, pid);  // also from this side, so no signal can race the child's own call

  ChildFailure failure;
  ssize_t n;
  while ((n = ::read(failure_pipe[0], &failure, sizeof failure)) < 0 && errno == EINTR) {
  }
  Close(failure_pipe[0]);
  if (n != static_cast<ssize_t>(sizeof failure)) return "";  // exec'd: the pipe closed empty
  Finish();
  pid_ = -1;
  return failure.step == kEnterDirectory
             ? fmt::format("cannot enter {}: {}", options.cwd, std::strerror(failure.error))
             : fmt::format("cannot run {}: {}", program, std::strerror(failure.error));
}

int Subprocess::Signal(int sig) const {
  return ::kill(pid_, sig);
}

int Subprocess::SignalGroup(int sig) const {
  return ::kill(-pid_, sig);
}

void Subprocess::Reaped(int wait_status) {
  reaped_ = true;
  status_ = ExitStatus::FromWaitStatus(wait_status);
}

bool Subprocess::Done() {
  if (!running()) return reaped_;
  int raw = 0;
  const pid_t r = ::waitpid(pid_, &raw, WNOHANG);
  if (r == pid_) {
    Reaped(raw);
  } else if (r < 0 && errno == ECHILD) {
    reaped_ = true;
    status_.error = fmt::format("lost track of process {}", pid_);
  }
  return reaped_;
}

ExitStatus Subprocess::Finish() {
  CloseAll();  // first: a child blocked writing to a full pipe would never end
  if (running()) {
    int raw = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &raw, 0)) < 0 && errno == EINTR) {
    }
    if (r == pid_) {
      Reaped(raw);
    } else {
      reaped_ = true;
      status_.error = fmt::format("lost track of process {}", pid_);
    }
  }
  return status_;
}

}  // namespace dtrain
