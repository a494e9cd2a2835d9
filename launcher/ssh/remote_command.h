// RemoteCommand: the one shell command line a node's sshd runs for one process. Remote side:
// the process runs in its own session (setsid) with its env, PYTHONPATH head and cwd applied,
// stdout and stderr on the channel's two streams; a command that is not found exits 127 with
// the node and PATH named; a watcher reads signal names from the channel's stdin and
// sends them to the process group, and on EOF (the connection is gone) terminates the group.
#pragma once

#include <string>

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
};

// The command line for `proc` (its argv, env, python_path_head and stdin_data size). Every
// value crosses the remote shell quoted, byte for byte. Throws Error naming the variable when an
// env name is not a shell name or a value holds a NUL byte (neither can reach a process).
std::string BuildRemoteCommand(const ProcessSpec& proc, const RemoteCommandOptions& options);

// What the launcher writes to a running process's channel to deliver `sig` ("TERM\n").
std::string RemoteSignalLine(int sig);

}  // namespace dtrain
