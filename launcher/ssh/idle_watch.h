// The node-side dead-man switch of the processes that read what dtrain streams to them rather
// than the "." lines of a rank's wrapper (remote_command.h): the heartbeat channel's echo and a
// sync's archive. Over a link that stays down nothing else ends them: their channel sees no EOF
// and sshd notices the dead connection only after TCP keepalive's two hours, so a node that
// comes back would hold a `cat` from every job that lost it and the half-received copy of a sync.
#pragma once

#include <string>
#include <string_view>

namespace dtrain {

// templates/idle_watch.sh as it crosses the wire (node_script.h), with every heartbeat and
// sync: `dtrain_idle_watch PID S`, which ends process PID once it read and wrote nothing for S
// seconds while it waited on a pipe or a socket (not on a disk, a file system or a lock).
const std::string& IdleWatchFunction();

// The heartbeat channel's command: echoes what it reads (dtrain sends a "." every half second
// and times the node by the echo), and ends once nothing came for `node_timeout_s` (rounded up
// to whole seconds; at least 1).
std::string HeartbeatCommand(double node_timeout_s);

// `node_timeout_s` as the whole seconds dtrain_idle_watch takes: rounded up, at least 1; 0
// (no watch) when it is 0 or less.
int IdleWatchSeconds(double node_timeout_s);

}  // namespace dtrain
