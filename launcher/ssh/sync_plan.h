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
  int64_t mtime = 0;     // whole seconds, as a tar header carries it to the node
  int64_t mtime_ns = 0;  // the nanoseconds past it, which tell edits within one second apart
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
  // The nanoseconds of this machine's file's time when it was synced ("mtime.nnnnnnnnn" in the
  // manifest); -1 in a manifest that does not record them. A file whose size and whole second
  // still match but whose nanoseconds differ was changed here since (perhaps within the second
  // of the last sync): its hash decides.
  int64_t local_ns = -1;
};

// One manifest record, "hash size mtime[.nnnnnnnnn] path" and its NUL (the fraction is
// local_ns, left out when it is -1), and back (without the NUL). Parsing returns false for a
// record that is not one: the file it names is then treated as unknown and hashed.
std::string ManifestRecord(const ManifestEntry& entry, const std::string& path);
bool ParseManifestRecord(const std::string& record, std::string& path, ManifestEntry& entry);

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

  // The files Plan(state) would hash first, on the caller's thread: those the node has at the
  // same size with another time, whose content decides, and that no plan hashed yet. A caller
  // that must not block (the sync's poll loop: gigabytes touched here take seconds) hashes them
  // elsewhere with FileSha256 and hands the hashes to AddHashes() before it calls Plan().
  std::vector<LocalFile> Unhashed(const NodeState& state) const;
  void AddHashes(const ContentHashes& hashes);

 private:
  const std::string& HashOf(const LocalFile& f);

  std::shared_ptr<const std::vector<LocalFile>> local_;  // shared with the archives' manifests
  std::set<std::string> paths_;
  std::shared_ptr<ContentHashes> hashes_ = std::make_shared<ContentHashes>();
};

}  // namespace dtrain
