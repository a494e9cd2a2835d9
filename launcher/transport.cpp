// Picks the transport the cluster file asks for, and says how a process ended in words.
#include "launcher/transport.h"

#include <csignal>
#include <cstring>

#include <fmt/format.h>

namespace dtrain {

std::unique_ptr<Transport> MakeTransport(const ClusterSpec& spec, double grace_period_s) {
  switch (spec.transport) {
    case TransportKind::kLocal:
      return MakeLocalTransport(spec);
    case TransportKind::kSsh:
      return MakeSshTransport(spec, grace_period_s);
    case TransportKind::kSlurm:
      return MakeSlurmTransport(spec);
  }
  return MakeSshTransport(spec, grace_period_s);
}

// "SIGKILL" for 9; "signal 42" when the C library has no abbreviation for it.
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

std::string ExitStatus::Describe() const {
  if (!error.empty()) return (lost ? "lost while running: " : "could not start: ") + error;
  if (signal != 0) return "killed by " + SignalName(signal);
  return fmt::format("exit {}", code);
}

}  // namespace dtrain
