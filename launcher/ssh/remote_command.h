// RemoteCommand: the one shell command line a node's sshd runs for one process. Remote side:
// the process runs in its own session (setsid) with its env, PYTHONPATH head and cwd applied,
// stdout and stderr on the channel's two streams; a command that is not found exits 127 with
// the node and PATH named; a watcher reads signal names from the channel's stdin and
// sends them to the process group, and on EOF (the connection is gone) terminates the group; with
// a node timeout, also when dtrain's heartbeat lines stop (a cut network never brings EOF).
#pragma once

#include <string>
#include <string_view>

#include "launcher/transport.h"

namespace dtrain {

// templates/dtrain_program.sh: `dtrain_program NAME DIR`, where a node finds dtrain's own
// programs. Ranks started by BuildRemoteCommand and the doctor's probe both use it.
std::string_view DtrainProgramLookup();

struct RemoteCommandOptions {
  std::string cwd;           // where the process starts; "" = the login directory
  bool cwd_required = true;  // false: fall back to the login directory when cwd is missing
  double grace_s = 5;        // after EOF: SIGTERM, then SIGKILL once this long passed (0.1 s steps)
  std::string program_dir;   // where dtrain/dtrain-clip are looked for first (dtrain_program)
  // > 0: the dead-man switch. The process group ends (as on EOF) once no "." line arrived on the
  // channel for this long (rounded up to whole seconds): see HeartbeatLine().
  double node_timeout_s = 0;
};

// The command line for `proc` (its argv, env, python_path_head and stdin_data size). Every
// value crosses the remote shell quoted, byte for byte. Throws Error naming the variable when an
// env name is not a shell name or a value holds a NUL byte (neither can reach a process).
std::string BuildRemoteCommand(const ProcessSpec& proc, const RemoteCommandOptions& options);

// What the launcher writes to a running process's channel to deliver `sig` ("TERM\n").
std::string RemoteSignalLine(int sig);

// What the launcher writes to a running process's channel, at least every half second, to keep
// its dead-man switch from ending it (RemoteCommandOptions::node_timeout_s).
constexpr std::string_view kHeartbeatLine = ".\n";

}  // namespace dtrain
