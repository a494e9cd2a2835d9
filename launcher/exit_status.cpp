// How a process ended, in numbers and in words.
#include "launcher/exit_status.h"

#include <sys/wait.h>

#include <csignal>
#include <cstring>

#include <fmt/format.h>

namespace dtrain {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? fmt::format("SIG{}", abbrev) : fmt::format("signal {}", sig);
}

ExitStatus ExitStatus::FromShellStatus(int shell_status) {
  ExitStatus status;
  if (shell_status > 128 && shell_status < 128 + 65) {
    status.signal = shell_status - 128;
  } else {
    status.code = shell_status;
  }
  return status;
}

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  ExitStatus status;
  if (WIFSIGNALED(wait_status)) {
    status.signal = WTERMSIG(wait_status);
  } else {
    status.code = WEXITSTATUS(wait_status);
  }
  return status;
}

std::string ExitStatus::Describe() const {
  if (!error.empty()) return (lost ? "lost while running: " : "could not start: ") + error;
  if (signal != 0) return "killed by " + SignalName(signal);
  return fmt::format("exit {}", code);
}

ExitStatus ExitStatus::NodeLost(const std::string& host, double silent_s, std::time_t last_seen) {
  std::string when = "never";
  if (last_seen != 0) {
    std::tm local{};
    localtime_r(&last_seen, &local);
    char text[16];
    std::strftime(text, sizeof text, "%H:%M:%S", &local);
    when = text;
  }
  ExitStatus status;
  status.lost = true;
  status.error =
      fmt::format("node {} lost: no answer for {:.0f} s, last seen {}", host, silent_s, when);
  return status;
}

}  // namespace dtrain
