// posix_spawn with pipes; a poll loop for short commands.
#include "launcher/slurm/slurm_child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "launcher/error.h"

extern char** environ;

namespace dtrain {
namespace {

void ClosePair(int fds[2]) {
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) close(fds[i]);
  }
}

void MakePipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) throw Error(fmt::format("pipe: {}", std::strerror(errno)));
}

// Appends what can be read from fd now; closes it and sets it to -1 at end of file.
void Drain(int& fd, std::string& into) {
  char buffer[65536];
  const ssize_t n = read(fd, buffer, sizeof buffer);
  if (n > 0) {
    into.append(buffer, static_cast<size_t>(n));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    close(fd);
    fd = -1;
  }
}

}  // namespace

std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (overrides.count(name) == 0) env.push_back(entry);
  }
  for (const auto& [name, value] : overrides) env.push_back(name + "=" + value);
  return env;
}

SlurmChild SpawnSlurmChild(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, bool with_stdin) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  SlurmChild child;
  try {
    MakePipe(out);
    MakePipe(err);
    if (with_stdin) {
      MakePipe(in);
      posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    } else {
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGCHLD}) sigaddset(&defaults, sig);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const int rc = posix_spawnp(&child.pid, args[0], &actions, &attr, args.data(), envp.data());
    if (rc != 0) {
      throw Error(fmt::format("cannot run {}: {} (is Slurm's client installed and on PATH?)",
                              argv[0], std::strerror(rc)));
    }
  } catch (...) {
    ClosePair(in);
    ClosePair(out);
    ClosePair(err);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    throw;
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (in[0] >= 0) close(in[0]);
  close(out[1]);
  close(err[1]);
  child.in = in[1];
  child.out = out[0];
  child.err = err[0];
  return child;
}

int ShellStatusOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

std::string SlurmCommandResult::Describe() const {
  std::string text = err;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (!text.empty()) return text;
  return status < 0 ? "did not finish" : fmt::format("exit {}", status);
}

SlurmCommandResult RunSlurmCommand(const std::vector<std::string>& argv, const std::string& input,
                                   int timeout_ms) {
  SlurmCommandResult result;
  SlurmChild child;
  try {
    child = SpawnSlurmChild(argv, EnvironmentWith({}), !input.empty());
  } catch (const Error& e) {
    result.err = e.what();
    return result;
  }
  if (child.in >= 0) {
    // Scripts are small (a few KiB): they fit in the pipe buffer.
    const ssize_t n = write(child.in, input.data(), input.size());
    (void)n;
    close(child.in);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (child.out >= 0 || child.err >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(-child.pid, SIGKILL);
      result.err += fmt::format("{} did not answer within {} s", argv[0], timeout_ms / 1000);
      break;
    }
    pollfd fds[2] = {{child.out, POLLIN, 0}, {child.err, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    if (child.out >= 0 && fds[0].revents) Drain(child.out, result.out);
    if (child.err >= 0 && fds[1].revents) Drain(child.err, result.err);
  }
  if (child.out >= 0) close(child.out);
  if (child.err >= 0) close(child.err);
  int wait_status = 0;
  while (waitpid(child.pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  if (result.status == -1 && result.err.find("did not answer") == std::string::npos) {
    result.status = ShellStatusOf(wait_status);
  }
  return result;
}

}  // namespace dtrain
