// What a sync moves to one node: this machine's tree (scanned with the ignore rules), what the
// node holds (its listing: sizes, mtimes and the manifest of hashes the last sync left there),
// and the decision between them: the files whose size or mtime differ there and whose content
// hash differs too, the files to delete (put there by an earlier sync, gone here), and the tar
// stream that carries them with the new manifest last.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "launcher/ssh/tar_stream.h"
#include "launcher/ssh/workdir_sync.h"

namespace dtrain {

// Names the sync keeps inside the destination (never listed, never deleted as the user's).
constexpr const char* kSyncManifest = ".dtrain-sync-manifest";
constexpr const char* kSyncDeleteList = ".dtrain-sync-delete";

// A file (or symbolic link) of the tree here.
struct LocalFile {
  std::string path;  // relative
  std::string full;
  uint64_t size = 0;
  int64_t mtime = 0;
  unsigned mode = 0644;
  std::string link_target;  // a symbolic link (copied as a link, as `rsync -a` does)
};

// A file as a node's listing shows it.
struct RemoteFile {
  uint64_t size = 0;
  int64_t mtime = 0;
};

// A file as the last sync to a node recorded it (its manifest line).
struct ManifestEntry {
  std::string hash;
  uint64_t size = 0;
  int64_t mtime = 0;
};

// Every file and symbolic link under `root` that the ignore rules (.gitignore, .dtrainignore,
// .git/) let through, folder `exclude` left out, in path order. Throws Error for a folder that
// cannot be read.
std::vector<LocalFile> ScanSyncSource(const std::string& root, const std::string& exclude);

// What a node holds: its files and the manifest the last sync left.
struct NodeState {
  std::string kind;  // new, shared, have
  std::map<std::string, RemoteFile> files;
  std::map<std::string, ManifestEntry> manifest;
};

// Decides, per node, what moves: files whose size or mtime differ there and whose content hash
// differs too, and the deletions (files an earlier sync put there that are gone here).
class SyncPlanner {
 public:
  explicit SyncPlanner(std::vector<LocalFile> local);

  // The archive for a node that holds `state`, counted into `result`; nullptr when in sync.
  std::shared_ptr<TarStream> Plan(const NodeState& state, NodeSyncResult& result);

 private:
  const std::string& HashOf(const LocalFile& f);

  std::shared_ptr<const std::vector<LocalFile>> local_;  // shared with the archives' manifests
  std::set<std::string> paths_;
  std::shared_ptr<ContentHashes> hashes_ = std::make_shared<ContentHashes>();
};

}  // namespace dtrain
