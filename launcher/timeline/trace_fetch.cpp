// One process per rank on the rank's node, run by the ssh transport (the launcher's own
// connections, host key checks and credentials): a fixed sh script that compares the node's
// file size with the local copy's and streams the file with cat when the node has more. Output
// arrives in pieces of at most a few socket reads and goes straight to disk, so memory stays
// small whatever the trace size.
#include "launcher/timeline/trace_fetch.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "launcher/rank_plan.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

// $1 the trace on the node, $2 the size of the local copy (-1: none). Exit 0 after streaming
// the file, kUpToDate when the local copy is as large, kMissing when the node has no such file.
constexpr const char* kFetchScript = R"sh(f=$1 have=$2
[ -e "$f" ] || exit 3
size=$(wc -c <"$f") || exit 4
size=$((size))
[ "$size" -gt "$have" ] || exit 10
exec cat -- "$f")sh";
// $1 the job's trace folder on the node: the traces in it, one name a line (none: no folder).
constexpr const char* kListScript = R"sh(cd "$1" 2>/dev/null || exit 0
for f in *.json *.json.gz; do [ -f "$f" ] && printf '%s\n' "$f"; done
exit 0)sh";
constexpr int kMissing = 3;
constexpr int kUpToDate = 10;
constexpr size_t kMessageBytes = 400;

int64_t FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return st.st_size;
}

// The first bytes of a failed transfer's output: the node's error message.
std::string MessageIn(const std::string& path) {
  std::string text(kMessageBytes, '\0');
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) return "";
  text.resize(std::fread(text.data(), 1, text.size(), file));
  std::fclose(file);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  return text;
}

// One rank's trace on its way: where it comes from and the temporary file it streams into.
struct Transfer {
  int id = 0;                  // the rank, or a running number
  std::string label;           // for messages: "rank 3", a file name
  std::string what = "trace";  // for messages: "trace", "metrics"
  bool warn_missing = true;
  std::string host;    // the node's name
  std::string node;    // "node gpu-b (10.0.0.12)"
  std::string remote;  // the path on the node
  std::string dest;    // <job>/timeline/rank-R.json
  std::string temp;    // hidden beside dest, renamed over it when whole
  int64_t local_size = -1;
  std::FILE* file = nullptr;
  uint64_t bytes = 0;
  std::string write_error;
};

// Receives every rank's output and end from the transport and files each trace.
class TraceDownloads : public TransportEvents {
 public:
  explicit TraceDownloads(TraceFetchReport& report) : report_(report) {}
  ~TraceDownloads() override {
    for (auto& [rank, t] : transfers_) Discard(t);
  }

  void Add(Transfer transfer) {
    Transfer& t = transfers_[transfer.id] = std::move(transfer);
    t.file = std::fopen(t.temp.c_str(), "wb");
    if (!t.file) t.write_error = fmt::format("{}: cannot write ({})", t.temp, std::strerror(errno));
  }

  void OnOutput(int id, OutputStream, std::string_view bytes) override {
    Transfer& t = transfers_.at(id);
    if (!t.file) return;
    if (std::fwrite(bytes.data(), 1, bytes.size(), t.file) != bytes.size()) {
      t.write_error = fmt::format("{}: cannot write ({})", t.temp, std::strerror(errno));
      std::fclose(t.file);
      t.file = nullptr;
    }
    t.bytes += bytes.size();
  }

  void OnExit(int id, const ExitStatus& status) override {
    Transfer& t = transfers_.at(id);
    if (t.file && std::fclose(t.file) != 0 && t.write_error.empty()) {
      t.write_error = fmt::format("{}: cannot write ({})", t.temp, std::strerror(errno));
    }
    t.file = nullptr;
    if (status.ok() && t.write_error.empty()) {
      if (std::rename(t.temp.c_str(), t.dest.c_str()) == 0) {
        report_.fetched.push_back(t.id);
        report_.bytes += t.bytes;
        return;
      }
      t.write_error = fmt::format("{}: cannot write ({})", t.dest, std::strerror(errno));
    }
    if (status.error.empty() && status.signal == 0 && status.code == kUpToDate) {
      ++report_.up_to_date;
    } else if (!t.write_error.empty()) {
      Warn(t, t.write_error);
    } else if (!status.error.empty()) {
      unreachable_[status.error].push_back(t.id);  // one warning per node, below
      if (!status.lost) report_.unreachable.insert(t.host);
    } else if (status.signal == 0 && status.code == kMissing) {
      if (t.warn_missing)
        Warn(t, fmt::format("{}: no file {} (did the rank start and write a trace?)", t.node,
                            t.remote));
    } else {
      std::string said = MessageIn(t.temp);
      Warn(t, fmt::format("{}: reading {} failed ({}){}{}", t.node, t.remote, status.Describe(),
                          said.empty() ? "" : ": ", said));
    }
    Discard(t);
  }

  // One warning per node that could not be reached, naming its ranks (or files).
  void ReportUnreachable() {
    for (const auto& [error, ids] : unreachable_) {
      const bool of_ranks = transfers_.at(ids.front()).label.rfind("rank ", 0) == 0;
      std::string list;
      bool any_local = false;
      for (int id : ids) {
        const Transfer& t = transfers_.at(id);
        list +=
            fmt::format("{}{}", list.empty() ? "" : ", ", of_ranks ? std::to_string(id) : t.label);
        any_local = any_local || t.local_size >= 0;
      }
      const char* plural = ids.size() == 1 ? "" : "s";
      report_.warnings.push_back(
          fmt::format("{}; {} not fetched{}", error,
                      of_ranks ? fmt::format("trace{} of rank{} {}", plural, plural, list) : list,
                      any_local ? " (the copies already here, which may be incomplete, are merged)"
                                : " (the merge goes on without them)"));
    }
  }

 private:
  void Warn(const Transfer& t, const std::string& what) {
    report_.warnings.push_back(fmt::format("{}: {} not fetched: {}", t.label, t.what, what));
  }
  static void Discard(Transfer& t) {
    if (t.file) std::fclose(t.file);
    t.file = nullptr;
    std::remove(t.temp.c_str());
  }

  TraceFetchReport& report_;
  std::map<int, Transfer> transfers_;
  std::map<std::string, std::vector<int>> unreachable_;
};

// The ssh settings the job was launched with; nodes are taken from job.json instead, as the
// launcher addressed them.
bool LoadSshOptions(const JobSummary& job, const std::string& override_file, SshOptions& ssh,
                    TraceFetchReport& report) {
  std::string file = override_file;
  if (file.empty()) {
    file = job.cluster_file;
    if (!file.empty() && fs::path(file).is_relative() && !job.launch_dir.empty()) {
      file = (fs::path(job.launch_dir) / file).string();
    }
  }
  if (file.empty()) {
    report.warnings.push_back(
        "the job record names no cluster file, so traces on the nodes were not fetched; give "
        "the cluster file with -c");
    return false;
  }
  try {
    ssh = ParseClusterFile(file).ssh;
    return true;
  } catch (const Error& e) {
    report.warnings.push_back(
        fmt::format("traces on the nodes were not fetched: {} (give the job's cluster file with "
                    "-c, or --no-fetch to merge only the traces here)",
                    e.what()));
    return false;
  }
}

// Temporary files of an earlier `dtrain timeline` that was killed mid-fetch: the process that
// wrote .NAME.fetch-PID is gone, so nothing will ever rename or remove them.
void RemoveAbandonedDownloads(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    auto at = name.rfind(".fetch-");
    if (name[0] != '.' || at == std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + at + 7));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

// One file on one node, to be copied into a folder of the job here.
struct NodeFile {
  int id = 0;         // the rank, or a running number for files of no one rank
  std::string label;  // for messages: "rank 3", "pytorch-rank0.json.gz"
  NodeSpec node;
  std::string remote;  // the path on the node
  std::string name;    // the file name here
};

// The ssh settings to reach a job's nodes: `ssh` (the launcher's own) when given, else from
// the cluster file. The nodes themselves come from job.json, as the launcher addressed them.
bool JobSsh(const JobSummary& job, const std::string& cluster_file, const SshOptions* ssh,
            ClusterSpec& spec, TraceFetchReport& report) {
  if (job.transport != "ssh") return false;
  spec.transport = TransportKind::kSsh;
  if (ssh) {
    spec.ssh = *ssh;
    return true;
  }
  return LoadSshOptions(job, cluster_file, spec.ssh, report);
}

// The node each rank ran on; empty where the record names none.
NodeSpec RankNode(const JobSummary& job, int rank) {
  NodeSpec node;
  auto host = job.rank_hosts.find(rank);
  auto address = job.rank_addresses.find(rank);
  node.host = host == job.rank_hosts.end() ? "" : host->second;
  node.address = address == job.rank_addresses.end() ? "" : address->second;
  if (node.address.empty()) node.address = node.host;
  return node;
}

// Copies `files` into `dir`, every node's at once over the transport for `ssh_spec`.
void FetchNodeFiles(const std::string& dir, const JobSummary& job, ClusterSpec ssh_spec,
                    const std::vector<NodeFile>& files, const std::string& what, bool warn_missing,
                    TraceFetchReport& report) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create ({})", dir, ec.message()));
  RemoveAbandonedDownloads(dir);

  report.contacted = true;
  TraceDownloads downloads(report);
  std::map<std::pair<std::string, std::string>, int> node_index;  // (host, address) -> node
  std::vector<ProcessSpec> procs;
  for (const NodeFile& file : files) {
    auto [at, added] = node_index.emplace(std::make_pair(file.node.host, file.node.address),
                                          static_cast<int>(ssh_spec.nodes.size()));
    if (added) ssh_spec.nodes.push_back(file.node);

    Transfer t;
    t.id = file.id;
    t.label = file.label;
    t.what = what;
    t.warn_missing = warn_missing;
    t.host = file.node.host;
    t.node = fmt::format("node {} ({})", file.node.host, file.node.address);
    t.remote = file.remote;
    t.dest = fmt::format("{}/{}", dir, file.name);
    t.temp = fmt::format("{}/.{}.fetch-{}", dir, file.name, ::getpid());
    t.local_size = FileSize(t.dest);
    // While the job runs, a trace here may be the very file a rank is appending to (shared
    // storage, or this machine is the node): never replace it then, only fill in missing ones.
    if (t.local_size >= 0 && job.status == "running") continue;
    ProcessSpec proc;
    proc.id = file.id;
    proc.node_index = at->second;
    proc.argv = {"/bin/sh",      "-c",        kFetchScript,
                 "dtrain-fetch", file.remote, std::to_string(t.local_size)};
    proc.cwd = "/";
    proc.own_step = true;
    procs.push_back(std::move(proc));
    downloads.Add(std::move(t));
  }
  std::unique_ptr<Transport> transport = MakeSshTransport(ssh_spec);
  transport->Start(procs, downloads);
  while (transport->Poll(1000, downloads)) {
  }
  downloads.ReportUnreachable();
}

// One file per rank from its node into <job_dir>/<folder>/rank-R.<extension>.
TraceFetchReport FetchRankFiles(const std::string& job_dir, const JobSummary& job,
                                const std::string& cluster_file,
                                const std::map<int, std::string>& remote_files,
                                const std::string& folder, const std::string& extension,
                                const std::string& what, bool warn_missing, const SshOptions* ssh) {
  TraceFetchReport report;
  ClusterSpec spec;
  if (remote_files.empty() || !JobSsh(job, cluster_file, ssh, spec, report)) return report;
  std::vector<NodeFile> files;
  for (const auto& [rank, remote] : remote_files) {
    NodeFile file;
    file.id = rank;
    file.label = fmt::format("rank {}", rank);
    file.node = RankNode(job, rank);
    if (file.node.address.empty()) continue;  // a record without a node for this rank
    file.remote = remote;
    file.name = fmt::format("rank-{}.{}", rank, extension);
    files.push_back(std::move(file));
  }
  FetchNodeFiles(job_dir + "/" + folder, job, spec, files, what, warn_missing, report);
  return report;
}

// Lists what every node holds in `remote_dir` (names ending .json or .json.gz) by node.
std::map<int, std::vector<std::string>> ListNodeTraceFiles(const ClusterSpec& spec,
                                                           const std::string& remote_dir,
                                                           TraceFetchReport& report) {
  struct Listing : TransportEvents {
    std::map<int, std::string> output;
    std::map<int, std::string> errors;
    void OnOutput(int id, OutputStream stream, std::string_view bytes) override {
      if (stream == OutputStream::kStdout) output[id].append(bytes);
    }
    void OnExit(int id, const ExitStatus& status) override {
      if (!status.ok()) errors[id] = status.error.empty() ? status.Describe() : status.error;
    }
  } listing;
  std::vector<ProcessSpec> procs;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    ProcessSpec proc;
    proc.id = proc.node_index = static_cast<int>(i);
    proc.argv = {"/bin/sh", "-c", kListScript, "dtrain-list", remote_dir};
    proc.cwd = "/";
    proc.own_step = true;
    procs.push_back(std::move(proc));
  }
  std::unique_ptr<Transport> transport = MakeSshTransport(spec);
  transport->Start(procs, listing);
  while (transport->Poll(1000, listing)) {
  }
  std::map<int, std::vector<std::string>> names;
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    const int id = static_cast<int>(i);
    if (auto error = listing.errors.find(id); error != listing.errors.end()) {
      report.warnings.push_back(fmt::format("{}; PyTorch profiler traces on node {} not fetched",
                                            error->second, spec.nodes[i].host));
      report.unreachable.insert(spec.nodes[i].host);
      continue;
    }
    std::string_view text = listing.output[id];
    for (size_t end; (end = text.find('\n')) != std::string_view::npos;
         text.remove_prefix(end + 1)) {
      if (end > 0) names[id].emplace_back(text.substr(0, end));
    }
  }
  return names;
}

}  // namespace

TraceFetchReport FetchRemoteTraces(const std::string& job_dir, const JobSummary& job,
                                   const std::string& cluster_file) {
  return FetchRankFiles(job_dir, job, cluster_file, job.rank_traces, "timeline", "json", "trace",
                        true, nullptr);
}

TraceFetchReport FetchRemoteMetrics(const std::string& job_dir, const JobSummary& job,
                                    const std::string& cluster_file, const SshOptions* ssh) {
  return FetchRankFiles(job_dir, job, cluster_file, job.rank_metrics, "metrics", "jsonl", "metrics",
                        false, ssh);
}

TraceFetchReport FetchEarlierRankMetrics(const std::string& job_dir, const JobSummary& job,
                                         const std::string& cluster_file, const SshOptions* ssh,
                                         int attempt, int rank, const NodeSpec& node) {
  if (job.rank_job_dir.empty()) return {};
  JobSummary then = job;  // the rank on the node it ran on then
  then.rank_hosts = {{rank, node.host}};
  then.rank_addresses = {{rank, node.address}};
  return FetchRankFiles(job_dir, then, cluster_file,
                        {{rank, fmt::format("{}/metrics/rank-{}.jsonl", job.rank_job_dir, rank)}},
                        fmt::format("metrics/attempt-{}", attempt), "jsonl", "metrics", false, ssh);
}

TraceFetchReport FetchRemoteProfilerTraces(const std::string& job_dir, const JobSummary& job,
                                           const std::string& cluster_file, const SshOptions* ssh,
                                           const std::set<std::string>& skip) {
  TraceFetchReport report;
  ClusterSpec spec;
  if (job.trace_dir.empty() || !JobSsh(job, cluster_file, ssh, spec, report)) return report;
  std::set<std::pair<std::string, std::string>> seen;  // (host, address)
  for (const auto& [rank, host] : job.rank_hosts) {
    NodeSpec node = RankNode(job, rank);
    if (!node.address.empty() && !skip.count(node.host) &&
        seen.emplace(node.host, node.address).second) {
      spec.nodes.push_back(node);
    }
  }
  if (spec.nodes.empty()) return report;
  const std::map<int, std::vector<std::string>> listed =
      ListNodeTraceFiles(spec, job.trace_dir, report);
  std::set<std::string> span_traces;  // dtrain-clip's, fetched by rank (FetchRemoteTraces)
  for (const auto& [rank, trace] : job.rank_traces) span_traces.insert(trace);
  std::map<std::string, int> nodes_with;  // file name -> how many nodes have one
  for (const auto& [node, names] : listed) {
    for (const std::string& name : names) ++nodes_with[name];
  }
  std::vector<NodeFile> files;
  for (const auto& [node, names] : listed) {
    for (const std::string& name : names) {
      NodeFile file;
      file.remote = job.trace_dir + "/" + name;
      if (span_traces.count(file.remote)) continue;
      file.id = static_cast<int>(files.size());
      file.node = spec.nodes[node];
      // Two nodes with a file of one name (a script that does not put the rank in it): both
      // are kept, each named after its node.
      file.name = nodes_with[name] > 1 ? fmt::format("{}-{}", file.node.host, name) : name;
      file.label = file.name;
      files.push_back(std::move(file));
    }
  }
  spec.nodes.clear();
  if (!files.empty())
    FetchNodeFiles(job_dir + "/timeline", job, spec, files, "trace", true, report);
  return report;
}

TraceFetchReport FetchRemoteErrorFiles(const std::string& job_dir, const JobSummary& job,
                                       const SshOptions& ssh, int attempt) {
  std::map<int, std::string> remote;
  if (job.rank_job_dir.empty()) return {};
  for (const auto& [rank, host] : job.rank_hosts)
    remote[rank] = ErrorFilePath(job.rank_job_dir, attempt, rank);
  return FetchRankFiles(job_dir, job, "", remote, fmt::format("errors/attempt-{}", attempt), "json",
                        "error file", false, &ssh);
}

}  // namespace dtrain
