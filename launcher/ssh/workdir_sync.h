// `dtrain sync` and `dtrain launch --sync`: the launch directory mirrored into the workdir of
// every node that does not already share it, before any rank starts. Per node, one process on
// one connection: it lists the node's files (size and mtime) and the manifest the last sync left
// there, then receives one tar stream of just the files whose size or mtime differ and whose
// content hash differs too, with the list of files to delete (files an earlier sync put there
// that are gone here). The node unpacks into a staging folder inside the workdir and renames
// each file into place, so a rank never sees half a file. All nodes at once, over the ssh
// transport.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "launcher/cluster_choice.h"
#include "launcher/cluster_spec.h"

namespace dtrain {

struct SyncOptions {
  std::string source;       // this machine's folder (the launch directory)
  std::string destination;  // on the nodes; "" = workdir, else the source's own path
  std::string exclude;      // a folder inside source to leave out (the job log folder)
  bool progress = false;    // a progress line on stderr (a terminal)
  // Asked while it copies (may be empty): true cuts the sync short, each node not done failing
  // with "cut short"; the connections close, so a node's half-received copy is thrown away.
  std::function<bool()> cancelled;
};

struct NodeSyncResult {
  std::string node;     // "node1 (10.0.0.11)"
  bool shared = false;  // the node sees this very folder: nothing was copied
  int files_sent = 0;
  uint64_t bytes_sent = 0;  // file contents sent (the archive adds 512-byte headers)
  int files_deleted = 0;
  int files_unchanged = 0;
  double seconds = 0;  // from the start of the sync to this node's end
  std::string error;   // "" when the node is in sync
};

struct SyncReport {
  std::string destination;
  int local_files = 0;
  uint64_t local_bytes = 0;
  std::vector<NodeSyncResult> nodes;
  bool ok() const;
};

// Throws UsageError for a non-ssh cluster; a node that fails is reported in its result.
SyncReport SyncWorkdir(const ClusterSpec& spec, const SyncOptions& options);

// One line per node ("dtrain: sync node1 (10.0.0.11): 3 files, 1.2 MB sent, 1 deleted, 0.4 s")
// and, for a failed node, what to do.
std::string DescribeSync(const SyncReport& report);

// `dtrain sync`: the cluster chosen as launch chooses it, synced; 0 when every node is in sync.
int RunSync(const ClusterChoice& choice);

}  // namespace dtrain
