// A poll loop over a child's stdout and stderr, with a deadline.
#include "launcher/short_command.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <fmt/format.h>

#include "launcher/subprocess.h"

namespace dtrain {

std::string ShortCommandResult::Describe() const {
  std::string text = err;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (!text.empty()) return text;
  return status < 0 ? "did not finish" : fmt::format("exit {}", status);
}

ShortCommandResult RunShortCommand(const std::vector<std::string>& argv, const std::string& input,
                                   int timeout_ms) {
  ShortCommandResult result;
  SubprocessOptions options;
  options.argv = argv;
  options.in = input.empty() ? Stdio::kNull : Stdio::kPipe;
  Subprocess child;
  result.err = child.Start(options);
  if (!result.err.empty()) return result;
  result.started = true;
  if (child.in_fd >= 0) {
    // Inputs are small (a few KiB): they fit in the pipe buffer.
    const ssize_t n = write(child.in_fd, input.data(), input.size());
    (void)n;
    Subprocess::Close(child.in_fd);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  char buffer[65536];
  while (child.out_fd >= 0 || child.err_fd >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      child.SignalGroup(SIGKILL);
      result.err += fmt::format("{} did not answer within {} s", argv[0], timeout_ms / 1000);
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{child.out_fd, POLLIN, 0}, {child.err_fd, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    if (child.out_fd >= 0 && fds[0].revents) {
      result.out.append(buffer, Subprocess::Read(child.out_fd, buffer, sizeof buffer));
    }
    if (child.err_fd >= 0 && fds[1].revents) {
      result.err.append(buffer, Subprocess::Read(child.err_fd, buffer, sizeof buffer));
    }
  }
  const ExitStatus status = child.Finish();
  if (!timed_out && status.error.empty()) result.status = status.ShellStatus();
  return result;
}

}  // namespace dtrain
