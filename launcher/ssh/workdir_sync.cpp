// SyncWorkdir reads top to bottom: scan here (ignore rules applied), start one ssh process per
// node (all at once) that lists the node's files and then receives; as each listing arrives,
// decide what moves to that node (sync_plan.h) and stream its archive on the same channel;
// report. Shared storage is found with a probe file: a uniquely named file created here in the
// source folder; a node that sees it in its destination shares the folder and is skipped.
#include "launcher/ssh/workdir_sync.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/exit_status.h"
#include "launcher/job_supervisor.h"
#include "launcher/ssh/idle_watch.h"
#include "launcher/ssh/node_script.h"
#include "launcher/ssh/ssh_config.h"
#include "launcher/ssh/sync_plan.h"
#include "launcher/ssh/tar_stream.h"
#include "launcher/transport.h"

namespace dtrain {

std::string_view SyncNodeScript();  // templates/sync_node.sh, embedded

namespace {

using Clock = std::chrono::steady_clock;

// templates/sync_node.sh: everything a sync does on a node, over one connection (list, then
// receive), with templates/idle_watch.sh in front; both as they cross the wire (node_script.h).
const std::string& SyncNodeCommand() {
  static const std::string script = IdleWatchFunction() + ScriptOnTheWire(SyncNodeScript());
  return script;
}

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

// A node's error when the sync was cancelled before it ended (SyncOptions::cancelled).
constexpr const char* kCutShort = "cut short by an interrupt; its partial copy is thrown away";

// Where a node's listing (templates/sync_node.sh) is in its stdout so far.
struct ListingParts {
  size_t kind_end = 0;     // the first line's newline
  size_t files_end = 0;    // the empty record ending the file records
  size_t manifest_at = 0;  // the manifest's first byte
  size_t end = 0;          // one past the listing's last byte; 0 while it is not all there
};

// `searched`: how far an earlier call on a shorter `out` looked for the end of the file records
// without finding it; it resumes there, so a long listing arriving in many pieces is scanned once.
ListingParts FindListing(const std::string& out, size_t& searched) {
  ListingParts parts;
  const size_t eol = out.find('\n');
  if (eol == std::string::npos) return parts;
  parts.kind_end = eol;
  if (out.compare(0, eol, "have") != 0) {
    parts.end = eol + 1;
    return parts;
  }
  if (out.size() > eol + 1 && out[eol + 1] == '\0') {
    parts.files_end = eol + 1;  // no files at all
  } else {
    const size_t pair = out.find(std::string("\0\0", 2), std::max(eol + 1, searched));
    if (pair == std::string::npos) {
      searched = out.size() - 1;  // a pair may still start at the last byte
      return parts;
    }
    parts.files_end = pair + 1;
  }
  const size_t length_eol = out.find('\n', parts.files_end + 1);
  if (length_eol == std::string::npos) return parts;
  const uint64_t length = std::strtoull(out.c_str() + parts.files_end + 1, nullptr, 10);
  parts.manifest_at = length_eol + 1;
  if (out.size() >= parts.manifest_at + length) parts.end = parts.manifest_at + length;
  return parts;
}

// "size mtime path" records (mtime may have a fraction), then the manifest's.
NodeState ParseListing(const std::string& out, const ListingParts& parts) {
  NodeState state;
  state.kind = out.substr(0, parts.kind_end);
  if (state.kind != "have") return state;
  for (const std::string& record : SplitNul(out, parts.kind_end + 1, parts.files_end)) {
    char* rest = nullptr;
    RemoteFile f;
    f.size = std::strtoull(record.c_str(), &rest, 10);
    f.mtime = std::strtoll(rest, &rest, 10);
    const size_t path_at = record.find(' ', record.find(' ') + 1);
    if (path_at != std::string::npos) state.files[record.substr(path_at + 1)] = f;
  }
  for (const std::string& record : SplitNul(out, parts.manifest_at, parts.end)) {
    std::string path;
    ManifestEntry entry;
    if (ParseManifestRecord(record, path, entry)) state.manifest[path] = std::move(entry);
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

// What a node's sync script reads once it has listed: a "." line every half second until this
// machine has decided (its dead-man switch hears dtrain while the files touched here are hashed),
// then "send" and the archive, or EOF at once when the node is in sync.
class NodeFeed : public StdinSource {
 public:
  void Send(std::shared_ptr<TarStream> archive) {
    archive_ = std::move(archive);
    pending_ = "send\n";
    decided_ = true;
  }
  void Skip() { decided_ = true; }
  bool Next(std::string& out, size_t max) override {
    if (!decided_) {  // still listing or hashing: a keepalive, and no EOF
      const auto now = Clock::now();
      if (now >= next_keepalive_) {
        out += ".\n";
        next_keepalive_ = now + std::chrono::milliseconds(500);
      }
      return true;
    }
    if (!pending_.empty()) {
      out += pending_;
      pending_.clear();
      return true;
    }
    return archive_ && archive_->Next(out, max);
  }
  const TarStream* archive() const { return archive_.get(); }

 private:
  bool decided_ = false;
  Clock::time_point next_keepalive_ = Clock::now();
  std::string pending_;
  std::shared_ptr<TarStream> archive_;
};

// One sync process per node: its listing is read as it arrives, and the moment it is all there
// the node's archive is planned and starts flowing on the same channel. The files whose hash
// decides are hashed on threads of their own (each file once, whichever node asked first), so
// the poll loop goes on sending to the other nodes and keeping every node's watch fed.
class NodeSyncs : public TransportEvents {
 public:
  NodeSyncs(SyncPlanner& planner, SyncReport& report) : planner_(planner), report_(report) {}
  ~NodeSyncs() override { stop_ = true; }  // the hashing threads end within one read

  std::shared_ptr<NodeFeed> Feed(int node) {
    return feeds_.emplace(node, std::make_shared<NodeFeed>()).first->second;
  }

  void OnOutput(int id, OutputStream stream, std::string_view bytes) override {
    if (stream == OutputStream::kStderr) {
      err_[id].append(bytes);
      return;
    }
    if (listed_.count(id)) return;  // the receiving side prints nothing on stdout
    std::string& out = out_[id];
    out.append(bytes);
    const ListingParts parts = FindListing(out, searched_[id]);
    if (parts.end == 0) return;
    listed_.insert(id);
    NodeSyncResult& result = report_.nodes[id];
    NodeState state = ParseListing(out, parts);
    out.clear();
    if (state.kind == "shared") {
      result.shared = true;
      return feeds_.at(id)->Skip();
    }
    PlanWhenHashed(id, std::move(state));
  }

  // Plans every node whose hashes are all in; called after every poll.
  void PlanReady() {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      bool ready = true;
      for (size_t batch : it->second.batches) {
        ready =
            ready && batches_[batch].wait_for(std::chrono::seconds(0)) == std::future_status::ready;
      }
      if (!ready) {
        ++it;
        continue;
      }
      for (size_t batch : it->second.batches) planner_.AddHashes(batches_[batch].get());
      Plan(it->first, it->second.state);
      it = waiting_.erase(it);
    }
  }

  void OnExit(int id, const ExitStatus& status) override {
    waiting_.erase(id);
    NodeSyncResult& result = report_.nodes[id];
    result.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    exited_.insert(id);
    std::string said = err_[id];
    while (!said.empty() && said.back() == '\n') said.pop_back();
    const TarStream* archive = feeds_.at(id)->archive();
    if (!status.ok()) {
      result.error = !status.error.empty() ? status.error
                     : !listed_.count(id)
                         ? fmt::format("listing {} failed ({}): {}", report_.destination,
                                       status.Describe(), said)
                         : fmt::format("writing into {} failed ({}){}{}", report_.destination,
                                       status.Describe(), said.empty() ? "" : ": ", said);
    } else if (!listed_.count(id)) {
      result.error =
          fmt::format("listing {} ended early: the node's shell printed {}", report_.destination,
                      out_[id].empty() ? "nothing" : "an incomplete listing");
    } else if (archive && !archive->read_error().empty()) {
      result.error =
          fmt::format("cannot read {} here; it was sent as zeros and goes again next sync",
                      archive->read_error());
    }
  }

  int ended() const { return static_cast<int>(exited_.size()); }
  // Every node not ended yet fails with `why` (the sync was cut short).
  void EndTheRest(const std::string& why) {
    for (size_t id = 0; id < report_.nodes.size(); ++id) {
      if (!exited_.count(static_cast<int>(id))) report_.nodes[id].error = why;
    }
  }
  uint64_t to_send() const { return to_send_; }
  uint64_t given() const {
    uint64_t bytes = 0;
    for (const auto& [id, feed] : feeds_) {
      if (feed->archive()) bytes += feed->archive()->bytes_given();
    }
    return bytes;
  }

 private:
  // A node listed, whose plan waits for these batches of hashes.
  struct Waiting {
    NodeState state;
    std::set<size_t> batches;  // indices into batches_
  };

  void PlanWhenHashed(int id, NodeState state) {
    Waiting waiting{std::move(state), {}};
    std::vector<LocalFile> batch;
    for (LocalFile& f : planner_.Unhashed(waiting.state)) {
      auto hashing = hashing_.find(f.path);
      if (hashing != hashing_.end()) {
        waiting.batches.insert(hashing->second);
      } else {
        batch.push_back(std::move(f));
      }
    }
    if (!batch.empty()) {
      for (const LocalFile& f : batch) hashing_[f.path] = batches_.size();
      waiting.batches.insert(batches_.size());
      batches_.push_back(std::async(std::launch::async, [batch = std::move(batch), this] {
                           ContentHashes hashes;
                           for (const LocalFile& f : batch) {
                             if (stop_) break;
                             hashes[f.path] =
                                 f.link_target.empty() ? FileSha256(f.full, &stop_) : "";
                           }
                           return hashes;
                         }).share());
    }
    waiting_[id] = std::move(waiting);
    PlanReady();
  }

  void Plan(int id, const NodeState& state) {
    NodeSyncResult& result = report_.nodes[id];
    NodeFeed& feed = *feeds_.at(id);
    std::shared_ptr<TarStream> archive = planner_.Plan(state, result);
    if (!archive) return feed.Skip();
    to_send_ += result.bytes_sent;
    feed.Send(std::move(archive));
  }

  SyncPlanner& planner_;
  SyncReport& report_;
  std::atomic<bool> stop_{false};  // before batches_: it outlives their threads
  std::vector<std::shared_future<ContentHashes>> batches_;
  std::map<std::string, size_t> hashing_;  // a file's path -> the batch that hashes it
  std::map<int, Waiting> waiting_;
  const Clock::time_point start_ = Clock::now();
  std::map<int, std::shared_ptr<NodeFeed>> feeds_;
  std::map<int, std::string> out_, err_;
  std::map<int, size_t> searched_;  // FindListing's resume points
  std::set<int> listed_;
  std::set<int> exited_;  // the nodes whose sync process ended
  uint64_t to_send_ = 0;
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
  std::vector<LocalFile> local = ScanSyncSource(options.source, options.exclude);
  report.local_files = static_cast<int>(local.size());
  for (const LocalFile& f : local) report.local_bytes += f.size;
  SyncPlanner planner(std::move(local));
  const ProbeFile probe(options.source);

  NodeSyncs syncs(planner, report);
  std::vector<ProcessSpec> procs;
  const std::string stage = fmt::format(".dtrain-sync-stage.{}", ::getpid());
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    ProcessSpec p;
    p.id = static_cast<int>(i);
    p.node_index = p.id;
    p.argv = {"/bin/sh",
              "-c",
              SyncNodeCommand(),
              "dtrain-sync",
              report.destination,
              probe.name(),
              stage,
              std::to_string(IdleWatchSeconds(spec.job.node_timeout_s))};
    p.stdin_source = syncs.Feed(p.id);
    procs.push_back(p);
    NodeSyncResult r;
    r.node = fmt::format("{} ({})", spec.nodes[i].host, spec.nodes[i].address);
    report.nodes.push_back(r);
  }
  // Watched as a job's nodes are: a node whose link goes down mid-copy is lost after the cluster
  // file's job.node_timeout (its copy thrown away) instead of holding the sync up for good.
  std::unique_ptr<Transport> transport = MakeSshTransport(
      spec, SshWatch{kDefaultRemoteGraceS, static_cast<double>(spec.job.node_timeout_s)});
  transport->Start(procs, syncs);
  auto last_draw = Clock::now();
  while (transport->Poll(200, syncs)) {
    syncs.PlanReady();
    if (options.cancelled && options.cancelled()) {
      syncs.EndTheRest(kCutShort);
      break;  // the transport's end closes the connections
    }
    if (!options.progress || Clock::now() - last_draw < std::chrono::milliseconds(200)) continue;
    last_draw = Clock::now();
    std::fprintf(stderr, "\rdtrain: sync: %d of %zu node(s) done, %s of %s   ", syncs.ended(),
                 procs.size(), Megabytes(std::min(syncs.given(), syncs.to_send())).c_str(),
                 Megabytes(syncs.to_send()).c_str());
  }
  if (options.progress) std::fputs("\r\033[K", stderr);
  return report;
}

std::string DescribeSync(const SyncReport& report) {
  std::string text;
  for (const NodeSyncResult& n : report.nodes) {
    if (n.error == kCutShort) {
      text += fmt::format("dtrain: sync {}: {}\n", n.node, n.error);
    } else if (!n.error.empty()) {
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
  // Ctrl-C (SIGTERM, SIGHUP) cuts the copy short: each node not done throws its partial copy
  // away, and the nodes done stay in sync.
  InterruptHandlers interrupts;
  options.cancelled = [] { return JobSupervisor::InterruptSignal() != 0; };
  const SyncReport report = SyncWorkdir(chosen.spec, options);
  std::fprintf(stderr, "dtrain: sync %s (%d files, %s) to %s on %zu node(s)\n", cwd,
               report.local_files, Megabytes(report.local_bytes).c_str(),
               report.destination.c_str(), report.nodes.size());
  std::fputs(DescribeSync(report).c_str(), stderr);
  if (const int signal = JobSupervisor::InterruptSignal()) {
    std::fprintf(stderr, "dtrain: sync interrupted by %s\n", SignalName(signal).c_str());
    return 128 + signal;
  }
  return report.ok() ? 0 : 1;
}

}  // namespace dtrain
