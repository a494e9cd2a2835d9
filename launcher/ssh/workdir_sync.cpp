// SyncWorkdir reads top to bottom: scan here (ignore rules applied), list every node (one ssh
// process each, all at once), decide per node what moves, stream the archives (all at once),
// report. Shared storage is found with a probe file: a uniquely named file created here in the
// source folder; a node that sees it in its destination shares the folder and is skipped.
#include "launcher/ssh/workdir_sync.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/ssh/ssh_config.h"
#include "launcher/ssh/sync_ignore.h"
#include "launcher/ssh/tar_stream.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kManifest = ".dtrain-sync-manifest";
constexpr const char* kDeleteList = ".dtrain-sync-delete";

// $1 destination, $2 probe file name. Prints "new" (no such folder), "shared" (the probe is
// there), or "have" then NUL-terminated "size mtime path" records, an empty record, and the
// manifest.
constexpr const char* kListScript = R"sh(cd -- "$1" 2>/dev/null || { echo new; exit 0; }
if [ -e "$2" ]; then echo shared; exit 0; fi
echo have
find . -name '.dtrain-sync*' -prune -o \( -type f -o -type l \) -printf '%s %T@ %P\0' || exit 4
printf '\0'
cat .dtrain-sync-manifest 2>/dev/null
exit 0)sh";

// $1 destination, $2 staging folder name. stdin: the tar archive. A destination that does not
// exist yet is unpacked beside it and renamed into place whole (one rename: nobody sees a part of
// it). Into an existing one, files land in the staging folder first and are renamed into place
// (one mv per folder, not per file: a process per file costs more than the copy); the manifest
// goes last.
constexpr const char* kReceiveScript = R"sh(dest=$1 stage=$2
while [ "$dest" != / ] && [ "${dest%/}" != "$dest" ]; do dest=${dest%/}; done
if [ ! -e "$dest" ]; then
  mkdir -p -- "$(dirname -- "$dest")" || { echo "cannot create the folder of $dest" >&2; exit 3; }
  whole="$dest$stage"
  rm -rf -- "$whole" && mkdir -- "$whole" || { echo "cannot create $whole" >&2; exit 3; }
  if ! tar -xf - -C "$whole" 2>"$whole.err"; then
    cat "$whole.err" >&2; rm -rf -- "$whole" "$whole.err"; exit 4
  fi
  rm -f -- "$whole.err" "$whole/.dtrain-sync-delete"
  if ! mv -T -- "$whole" "$dest" 2>/dev/null; then
    rm -rf -- "$whole"; echo "$dest appeared while it was being synced; sync again" >&2; exit 5
  fi
  exit 0
fi
mkdir -p -- "$dest" && cd -- "$dest" || { echo "cannot create or enter $dest" >&2; exit 3; }
rm -rf -- "$stage" && mkdir -- "$stage" || exit 3
if ! tar -xf - -C "$stage" 2>"$stage.err"; then
  cat "$stage.err" >&2; rm -rf -- "$stage" "$stage.err"; exit 4
fi
rm -f -- "$stage.err"
if [ -f "$stage/.dtrain-sync-delete" ]; then
  xargs -0 -r rm -f -- <"$stage/.dtrain-sync-delete"
  rm -f -- "$stage/.dtrain-sync-delete"
fi
mv -f -- "$stage/.dtrain-sync-manifest" "$stage.manifest" 2>/dev/null
(cd "$stage" && find . -type d -print0 | (cd .. && xargs -0 mkdir -p --) &&
  find . -type d -exec sh -c 'for d; do
    find "$d" -maxdepth 1 \( -type f -o -type l \) -print0 |
      xargs -0 -r mv -f -t "../$d" -- || exit 1; done' sh {} +
) || { rm -rf -- "$stage"; exit 5; }
rm -rf -- "$stage"
if [ -f "$stage.manifest" ]; then mv -f -- "$stage.manifest" .dtrain-sync-manifest; fi
exit 0)sh";

struct LocalFile {
  std::string path;  // relative
  std::string full;
  uint64_t size = 0;
  int64_t mtime = 0;
  unsigned mode = 0644;
  std::string link_target;  // a symbolic link (copied as a link, as `rsync -a` does)
};

struct RemoteFile {
  uint64_t size = 0;
  int64_t mtime = 0;
};

struct ManifestEntry {
  std::string hash;
  uint64_t size = 0;
  int64_t mtime = 0;
};

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

// Collects each process's stdout and end.
class Outputs : public TransportEvents {
 public:
  void OnOutput(int id, OutputStream stream, std::string_view bytes) override {
    (stream == OutputStream::kStdout ? out[id] : err[id]).append(bytes);
  }
  void OnExit(int id, const ExitStatus& status) override { exits[id] = status; }
  std::map<int, std::string> out, err;
  std::map<int, ExitStatus> exits;
};

// What a node holds: its files and the manifest the last sync left.
struct NodeState {
  std::string kind;  // new, shared, have
  std::map<std::string, RemoteFile> files;
  std::map<std::string, ManifestEntry> manifest;
};

std::vector<std::string> SplitNul(const std::string& text, size_t from, size_t to) {
  std::vector<std::string> parts;
  size_t start = from;
  for (size_t i = from; i < to; ++i) {
    if (text[i] == '\0') {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// "size mtime path" (mtime may have a fraction) and "hash size mtime path" records.
NodeState ParseListing(const std::string& out) {
  NodeState state;
  const size_t eol = out.find('\n');
  state.kind = out.substr(0, eol);
  if (state.kind != "have") return state;
  const size_t end = out.find(std::string("\0\0", 2), eol);
  size_t files_end = end == std::string::npos ? out.size() : end + 1;
  if (out.size() > eol + 1 && out[eol + 1] == '\0') files_end = eol + 1;  // no files at all
  for (const std::string& record : SplitNul(out, eol + 1, files_end)) {
    char* rest = nullptr;
    RemoteFile f;
    f.size = std::strtoull(record.c_str(), &rest, 10);
    f.mtime = std::strtoll(rest, &rest, 10);
    const size_t path_at = record.find(' ', record.find(' ') + 1);
    if (path_at != std::string::npos) state.files[record.substr(path_at + 1)] = f;
  }
  for (const std::string& record : SplitNul(out, std::min(out.size(), files_end + 1), out.size())) {
    char hash[65] = {};
    unsigned long long size = 0;
    long long mtime = 0;
    int used = 0;
    if (std::sscanf(record.c_str(), "%64s %llu %lld %n", hash, &size, &mtime, &used) < 3) continue;
    state.manifest[record.substr(used)] = {hash, size, mtime};
  }
  return state;
}

std::string Megabytes(uint64_t bytes) {
  return fmt::format("{:.1f} MB", bytes / 1e6);
}

// The probe that tells shared storage apart: created here, looked for on every node.
class ProbeFile {
 public:
  explicit ProbeFile(const std::string& dir) {
    std::random_device random;
    name_ = fmt::format(".dtrain-sync-probe-{}-{:08x}", ::getpid(), random());
    path_ = dir + "/" + name_;
    std::FILE* f = std::fopen(path_.c_str(), "w");
    if (f) std::fclose(f);
  }
  ~ProbeFile() { std::remove(path_.c_str()); }
  const std::string& name() const { return name_; }

 private:
  std::string name_, path_;
};

}  // namespace

bool SyncReport::ok() const {
  for (const NodeSyncResult& n : nodes) {
    if (!n.error.empty()) return false;
  }
  return true;
}

SyncReport SyncWorkdir(const ClusterSpec& spec, const SyncOptions& options) {
  if (spec.transport != TransportKind::kSsh) {
    throw UsageError(
        fmt::format("sync: the cluster is transport {}, whose nodes are this machine "
                    "or reach their files through Slurm; sync is for ssh clusters",
                    TransportName(spec.transport)));
  }
  SyncReport report;
  report.destination = !options.destination.empty() ? options.destination
                       : !spec.workdir.empty()      ? spec.workdir
                                                    : options.source;
  SyncIgnore ignore;
  std::vector<LocalFile> local;
  Scan(options.source, "", options.exclude, ignore, local);
  report.local_files = static_cast<int>(local.size());
  std::set<std::string> local_paths;
  for (const LocalFile& f : local) local_paths.insert(f.path);
  for (const LocalFile& f : local) report.local_bytes += f.size;
  const ProbeFile probe(options.source);

  // 1. What every node holds.
  std::vector<ProcessSpec> lists;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    ProcessSpec p;
    p.id = static_cast<int>(i);
    p.node_index = p.id;
    p.argv = {"/bin/sh", "-c", kListScript, "dtrain-sync", report.destination, probe.name()};
    p.cwd = "/";
    lists.push_back(p);
    NodeSyncResult r;
    r.node = fmt::format("{} ({})", spec.nodes[i].host, spec.nodes[i].address);
    report.nodes.push_back(r);
  }
  const auto start = Clock::now();
  Outputs listed;
  {
    std::unique_ptr<Transport> transport = MakeSshTransport(spec);
    transport->Start(lists, listed);
    while (transport->Poll(1000, listed)) {
    }
  }

  // 2. What moves where.
  auto hashes = std::make_shared<ContentHashes>();
  auto hash_of = [&](const LocalFile& f) -> const std::string& {
    auto it = hashes->find(f.path);
    if (it == hashes->end()) {
      it = hashes->emplace(f.path, f.link_target.empty() ? FileSha256(f.full) : "").first;
    }
    return it->second;
  };
  std::vector<ProcessSpec> sends;
  std::map<int, std::shared_ptr<TarStream>> streams;
  uint64_t total_to_send = 0;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    NodeSyncResult& result = report.nodes[i];
    const ExitStatus& status = listed.exits[static_cast<int>(i)];
    if (!status.ok()) {
      result.error = !status.error.empty()
                         ? status.error
                         : fmt::format("listing {} failed ({}): {}", report.destination,
                                       status.Describe(), listed.err[static_cast<int>(i)]);
      continue;
    }
    NodeState state = ParseListing(listed.out[static_cast<int>(i)]);
    if (state.kind == "shared") {
      result.shared = true;
      continue;
    }
    std::vector<TarEntry> entries;
    std::map<std::string, ManifestEntry> kept;  // unchanged files: what the node has
    for (const LocalFile& f : local) {
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
        if (known_content && r.size == f.size && known->second.hash == hash_of(f)) {
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
      if (!local_paths.count(path) && state.files.count(path)) {
        deletions += path + '\0';
        ++result.files_deleted;
      }
    }
    if (entries.empty() && deletions.empty()) continue;  // already in sync
    total_to_send += result.bytes_sent;
    auto finish = [local, kept, deletions, hashes]() {
      std::string manifest;
      for (const LocalFile& f : local) {
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
        out.push_back({kDeleteList, "", deletions, deletions.size(), now, 0644, ""});
      out.push_back({kManifest, "", manifest, manifest.size(), now, 0644, ""});
      return out;
    };
    auto stream = std::make_shared<TarStream>(std::move(entries), hashes, finish);
    streams[static_cast<int>(i)] = stream;
    ProcessSpec p;
    p.id = static_cast<int>(i);
    p.node_index = p.id;
    p.argv = {"/bin/sh",          "-c",
              kReceiveScript,     "dtrain-sync",
              report.destination, fmt::format(".dtrain-sync-stage.{}", ::getpid())};
    p.stdin_source = stream;
    sends.push_back(p);
  }

  // 3. Every archive at once.
  Outputs sent;
  if (!sends.empty()) {
    std::unique_ptr<Transport> transport = MakeSshTransport(spec);
    transport->Start(sends, sent);
    auto last_draw = Clock::now();
    while (transport->Poll(200, sent)) {
      if (!options.progress || Clock::now() - last_draw < std::chrono::milliseconds(200)) continue;
      last_draw = Clock::now();
      uint64_t given = 0;
      for (const auto& [id, s] : streams) given += s->bytes_given();
      std::fprintf(stderr, "\rdtrain: sync: %zu of %zu node(s) done, %s of %s   ",
                   sent.exits.size(), sends.size(),
                   Megabytes(std::min(given, total_to_send)).c_str(),
                   Megabytes(total_to_send).c_str());
    }
    if (options.progress) std::fputs("\r\033[K", stderr);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const ProcessSpec& p : sends) {
    NodeSyncResult& result = report.nodes[p.id];
    result.seconds = seconds;
    const ExitStatus& status = sent.exits[p.id];
    if (!status.ok()) {
      std::string said = sent.err[p.id];
      while (!said.empty() && said.back() == '\n') said.pop_back();
      result.error = !status.error.empty()
                         ? status.error
                         : fmt::format("writing into {} failed ({}){}{}", report.destination,
                                       status.Describe(), said.empty() ? "" : ": ", said);
    } else if (!streams[p.id]->read_error().empty()) {
      result.error = fmt::format(
          "cannot read {} here; it was sent as zeros and goes again next "
          "sync",
          streams[p.id]->read_error());
    }
  }
  for (NodeSyncResult& r : report.nodes) {
    if (r.seconds == 0) r.seconds = seconds;
  }
  return report;
}

std::string DescribeSync(const SyncReport& report) {
  std::string text;
  for (const NodeSyncResult& n : report.nodes) {
    if (!n.error.empty()) {
      text += fmt::format("dtrain: sync {}: FAILED: {}; fix it and run `dtrain sync` again\n",
                          n.node, n.error);
    } else if (n.shared) {
      text += fmt::format("dtrain: sync {}: shares {} with this machine: nothing to copy\n", n.node,
                          report.destination);
    } else {
      text += fmt::format(
          "dtrain: sync {}: {} file(s), {} sent, {} deleted, {} unchanged ({:.1f} s)\n", n.node,
          n.files_sent, Megabytes(n.bytes_sent), n.files_deleted, n.files_unchanged, n.seconds);
    }
  }
  return text;
}

int RunSync(const ClusterChoice& choice) {
  const ChosenCluster chosen = ChooseCluster(choice);
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) throw Error(std::string("getcwd: ") + std::strerror(errno));
  SyncOptions options;
  options.source = cwd;
  options.progress = ::isatty(STDERR_FILENO);
  const SyncReport report = SyncWorkdir(chosen.spec, options);
  std::fprintf(stderr, "dtrain: sync %s (%d files, %s) to %s on %zu node(s)\n", cwd,
               report.local_files, Megabytes(report.local_bytes).c_str(),
               report.destination.c_str(), report.nodes.size());
  std::fputs(DescribeSync(report).c_str(), stderr);
  return report.ok() ? 0 : 1;
}

}  // namespace dtrain
