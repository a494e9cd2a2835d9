#include "launcher/ssh/sync_plan.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

}  // namespace

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

std::shared_ptr<TarStream> SyncPlanner::Plan(const NodeState& state, NodeSyncResult& result) {
  std::vector<TarEntry> entries;
  std::map<std::string, ManifestEntry> kept;  // unchanged files: what the node has
  for (const LocalFile& f : *local_) {
    auto there = state.files.find(f.path);
    if (there != state.files.end()) {
      const RemoteFile& r = there->second;
      auto known = state.manifest.find(f.path);
      const bool same_stat = r.size == f.size && r.mtime == f.mtime;
      const bool known_content = known != state.manifest.end() && known->second.size == r.size &&
                                 known->second.mtime == r.mtime;
      if (same_stat) {
        kept[f.path] = {known_content ? known->second.hash : "-", r.size, r.mtime};
        ++result.files_unchanged;
        continue;
      }
      if (known_content && r.size == f.size && known->second.hash == HashOf(f)) {
        kept[f.path] = known->second;  // touched here, same bytes: nothing to send
        ++result.files_unchanged;
        continue;
      }
    }
    entries.push_back({f.path, f.link_target.empty() ? f.full : "", "",
                       f.link_target.empty() ? f.size : 0, f.mtime, f.mode, f.link_target});
    ++result.files_sent;
    if (f.link_target.empty()) result.bytes_sent += f.size;
  }
  std::string deletions;
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
        manifest +=
            fmt::format("{} {} {} {}", k->second.hash, k->second.size, k->second.mtime, f.path) +
            '\0';
      } else {
        auto h = hashes->find(f.path);
        const std::string hash = h != hashes->end() && !h->second.empty() ? h->second : "-";
        manifest += fmt::format("{} {} {} {}", hash, f.size, f.mtime, f.path) + '\0';
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
