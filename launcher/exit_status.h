// ExitStatus: how a process ended, wherever it ran (a child of dtrain, a remote shell, an srun
// task), and the one decoder of waitpid(2)'s raw status.
#pragma once

#include <ctime>
#include <string>

namespace dtrain {

struct ExitStatus {
  int code = 0;       // exit code when the process exited
  int signal = 0;     // terminating signal, 0 if it exited
  std::string error;  // set when the transport could not run it at all (spawn, connect, auth)

  bool ok() const { return error.empty() && signal == 0 && code == 0; }
  bool not_found = false;  // the command was not found where it runs (error says where it looked)
  bool lost = false;       // with error: it ran, then the transport lost it (connection dropped)

  // What a shell would report: code, 128+signal, 127 when the command was not found, or 255
  // when the transport failed it (it never ran, or its connection dropped while it ran).
  int ShellStatus() const {
    return not_found ? 127 : !error.empty() ? 255 : signal ? 128 + signal : code;
  }
  std::string Describe() const;  // "exit 7", "killed by SIGKILL", "could not start: ..."
  // The inverse of ShellStatus for a status reported by a remote shell: above 128 is a signal.
  static ExitStatus FromShellStatus(int shell_status);
  // A raw status from waitpid(2) of a process that ended.
  static ExitStatus FromWaitStatus(int wait_status);
  // What every process of a node the transport stopped hearing from ends with: lost, the error
  // "node gpu-b lost: no answer for 10 s, last seen 12:01:07" (local time; "never" for 0).
  static ExitStatus NodeLost(const std::string& host, double silent_s, std::time_t last_seen);
};

// "SIGKILL" for 9; "signal N" when the C library has no name for it.
std::string SignalName(int sig);

}  // namespace dtrain
