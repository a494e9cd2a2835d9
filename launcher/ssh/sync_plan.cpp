#include "launcher/ssh/sync_plan.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/ssh/sync_ignore.h"

namespace dtrain {
namespace {

void Scan(const std::string& root, const std::string& relative, const std::string& exclude,
          SyncIgnore& ignore, std::vector<LocalFile>& out) {
  const std::string dir = relative.empty() ? root : root + "/" + relative;
  ignore.ReadFolder(dir, relative);
  DIR* d = opendir(dir.c_str());
  if (!d)
    throw Error(fmt::format("{}: cannot read the folder to sync: {}", dir, std::strerror(errno)));
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string rel = relative.empty() ? name : relative + "/" + name;
    const std::string full = root + "/" + rel;
    struct stat st;
    if (lstat(full.c_str(), &st) != 0) continue;  // vanished meanwhile
    if (S_ISDIR(st.st_mode)) {
      if (full == exclude || ignore.Ignored(rel, true)) continue;
      Scan(root, rel, exclude, ignore, out);
    } else if ((S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) && !ignore.Ignored(rel, false)) {
      LocalFile f{rel,
                  full,
                  static_cast<uint64_t>(st.st_size),
                  st.st_mtim.tv_sec,
                  st.st_mtim.tv_nsec,
                  static_cast<unsigned>(st.st_mode & 07777),
                  ""};
      if (S_ISLNK(st.st_mode)) {
        std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
        const ssize_t n = ::readlink(full.c_str(), target.data(), target.size());
        if (n <= 0 || static_cast<size_t>(n) >= target.size()) continue;  // changed meanwhile
        target.resize(static_cast<size_t>(n));
        f.link_target = std::move(target);
      }
      out.push_back(std::move(f));
    }
    // Sockets, pipes and devices are not copied.
  }
}

// The manifest's entry for `f` where it describes the file the node has (`r`: same size and
// time as when the last sync wrote it); nullptr when the node's file changed since or is unknown.
const ManifestEntry* KnownContent(const LocalFile& f, const RemoteFile& r, const NodeState& state) {
  auto known = state.manifest.find(f.path);
  if (known == state.manifest.end() || known->second.size != r.size ||
      known->second.mtime != r.mtime)
    return nullptr;
  return &known->second;
}

// Size and whole second alike, and (where the manifest knows them: `known`, KnownContent's) the
// nanoseconds too.
bool SameStat(const LocalFile& f, const RemoteFile& r, const ManifestEntry* known) {
  if (r.size != f.size || r.mtime != f.mtime) return false;
  return !known || known->local_ns < 0 || known->local_ns == f.mtime_ns;
}

// Not the same stat, but the same size and a known content: the hash of the file here decides.
bool HashDecides(const LocalFile& f, const RemoteFile& r, const ManifestEntry* known) {
  return r.size == f.size && known != nullptr;
}

// Python's bytecode cache on the node for `path` (a .py file): "<dir>/__pycache__/<stem>.*.pyc",
// NUL-terminated. Python checks a cached file against its source's size and whole-second time,
// which a source edited within the second of the last sync, to the same size, keeps: its cache
// would run the old code, so it goes.
std::string StaleBytecode(const std::string& path, const std::map<std::string, RemoteFile>& files) {
  if (path.size() < 3 || path.compare(path.size() - 3, 3, ".py") != 0) return "";
  const size_t slash = path.rfind('/');
  const size_t stem_at = slash == std::string::npos ? 0 : slash + 1;
  const std::string prefix = path.substr(0, stem_at) + "__pycache__/" +
                             path.substr(stem_at, path.size() - 3 - stem_at) + ".";
  std::string out;
  for (auto it = files.lower_bound(prefix);
       it != files.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    const std::string& name = it->first;
    if (name.find('/', prefix.size()) == std::string::npos && name.size() > 4 &&
        name.compare(name.size() - 4, 4, ".pyc") == 0)
      out += name + '\0';
  }
  return out;
}

}  // namespace

std::string ManifestRecord(const ManifestEntry& e, const std::string& path) {
  std::string record =
      e.local_ns >= 0 ? fmt::format("{} {} {}.{:09d} {}", e.hash, e.size, e.mtime, e.local_ns, path)
                      : fmt::format("{} {} {} {}", e.hash, e.size, e.mtime, path);
  record += '\0';
  return record;
}

bool ParseManifestRecord(const std::string& record, std::string& path, ManifestEntry& entry) {
  char hash[65] = {};
  unsigned long long size = 0;
  long long mtime = 0;
  int used = 0;
  if (std::sscanf(record.c_str(), "%64s %llu %lld%n", hash, &size, &mtime, &used) < 3) return false;
  size_t at = static_cast<size_t>(used);
  int64_t local_ns = -1;
  if (at < record.size() && record[at] == '.') {
    local_ns = 0;
    for (int digit = 0; digit < 9; ++digit) {
      const char c = ++at < record.size() ? record[at] : '\0';
      if (c < '0' || c > '9') return false;
      local_ns = local_ns * 10 + (c - '0');
    }
    ++at;
  }
  if (at >= record.size() || record[at] != ' ') return false;
  path = record.substr(at + 1);
  entry = {hash, size, mtime, local_ns};
  return !path.empty();
}

std::vector<LocalFile> ScanSyncSource(const std::string& root, const std::string& exclude) {
  SyncIgnore ignore;
  std::vector<LocalFile> files;
  Scan(root, "", exclude, ignore, files);
  return files;
}

SyncPlanner::SyncPlanner(std::vector<LocalFile> local)
    : local_(std::make_shared<const std::vector<LocalFile>>(std::move(local))) {
  for (const LocalFile& f : *local_) paths_.insert(f.path);
}

std::vector<LocalFile> SyncPlanner::Unhashed(const NodeState& state) const {
  std::vector<LocalFile> out;
  for (const LocalFile& f : *local_) {
    auto there = state.files.find(f.path);
    if (there == state.files.end() || hashes_->count(f.path)) continue;
    const ManifestEntry* known = KnownContent(f, there->second, state);
    if (!SameStat(f, there->second, known) && HashDecides(f, there->second, known)) {
      out.push_back(f);
    }
  }
  return out;
}

void SyncPlanner::AddHashes(const ContentHashes& hashes) {
  for (const auto& [path, hash] : hashes) hashes_->emplace(path, hash);
}

std::shared_ptr<TarStream> SyncPlanner::Plan(const NodeState& state, NodeSyncResult& result) {
  std::vector<TarEntry> entries;
  std::map<std::string, ManifestEntry> kept;  // unchanged files: what the node has
  // Stale bytecode first (a cache, not the user's files: not counted), then the user's files.
  std::string deletions;
  for (const LocalFile& f : *local_) {
    auto there = state.files.find(f.path);
    const bool same_size_and_second = there != state.files.end() && there->second.size == f.size &&
                                      there->second.mtime == f.mtime;
    if (there != state.files.end()) {
      const RemoteFile& r = there->second;
      const ManifestEntry* known = KnownContent(f, r, state);
      if (SameStat(f, r, known)) {
        kept[f.path] = {known ? known->hash : "-", r.size, r.mtime, f.mtime_ns};
        ++result.files_unchanged;
        continue;
      }
      if (HashDecides(f, r, known) && known->hash == HashOf(f)) {
        // Touched here, same bytes: nothing to send. The manifest keeps the node's time and this
        // machine's nanoseconds, so the next sync does not hash it again.
        kept[f.path] = {known->hash, r.size, r.mtime, r.mtime == f.mtime ? f.mtime_ns : -1};
        ++result.files_unchanged;
        continue;
      }
    }
    entries.push_back({f.path, f.link_target.empty() ? f.full : "", "",
                       f.link_target.empty() ? f.size : 0, f.mtime, f.mode, f.link_target});
    ++result.files_sent;
    if (f.link_target.empty()) result.bytes_sent += f.size;
    if (same_size_and_second) deletions += StaleBytecode(f.path, state.files);
  }
  for (const auto& [path, entry] : state.manifest) {
    if (!paths_.count(path) && state.files.count(path)) {
      deletions += path + '\0';
      ++result.files_deleted;
    }
  }
  if (entries.empty() && deletions.empty()) return nullptr;
  // The manifest goes last: it needs the hashes computed while streaming.
  auto finish = [local = local_, kept, deletions, hashes = hashes_]() {
    std::string manifest;
    for (const LocalFile& f : *local) {
      auto k = kept.find(f.path);
      if (k != kept.end()) {
        manifest += ManifestRecord(k->second, f.path);
      } else {
        auto h = hashes->find(f.path);
        const std::string hash = h != hashes->end() && !h->second.empty() ? h->second : "-";
        manifest += ManifestRecord({hash, f.size, f.mtime, f.mtime_ns}, f.path);
      }
    }
    const int64_t now = static_cast<int64_t>(::time(nullptr));
    std::vector<TarEntry> out;
    if (!deletions.empty())
      out.push_back({kSyncDeleteList, "", deletions, deletions.size(), now, 0644, ""});
    out.push_back({kSyncManifest, "", manifest, manifest.size(), now, 0644, ""});
    return out;
  };
  return std::make_shared<TarStream>(std::move(entries), hashes_, finish);
}

const std::string& SyncPlanner::HashOf(const LocalFile& f) {
  auto it = hashes_->find(f.path);
  if (it == hashes_->end()) {
    it = hashes_->emplace(f.path, f.link_target.empty() ? FileSha256(f.full) : "").first;
  }
  return it->second;
}

}  // namespace dtrain
