// Checkpoint parts a killed writer left behind. SaveCheckpoint (checkpoint.h) writes
// CheckpointPartPath(NAME.pt), NAME.pt.tmp.HOST.PID, then renames it into place; a writer killed
// before the rename (the launcher's SIGKILL at the end of its grace period while a slow disk
// writes, an OOM kill, a lost node's dead-man switch) leaves the part, as large as a checkpoint
// (1.7 GiB for ViT-B/32), and every restart killed so adds one until the disk is full. A part
// written on this host by a process that is gone is removed when training starts; one of another
// host (a shared folder, where that node's writer may still run) or of a process still alive is
// left alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::clip {

struct RemovedCheckpointParts {
  std::vector<std::string> paths;
  uint64_t bytes = 0;
};

// Where this process writes checkpoint `path` before its rename: PATH.tmp.HOST.PID (host and pid:
// two nodes may write one shared folder, node_local_checkpoints.h).
std::string CheckpointPartPath(const std::string& path);

// Removes the abandoned parts in `dir` (see above); what it removed.
RemovedCheckpointParts RemoveAbandonedCheckpointParts(const std::string& dir);

}  // namespace dtrain::clip
