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

#include <fmt/format.h>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"
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
  int rank = 0;
  std::string what = "trace";  // for messages: "trace", "metrics"
  bool warn_missing = true;
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
    Transfer& t = transfers_[transfer.rank] = std::move(transfer);
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
        report_.fetched.push_back(t.rank);
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
      unreachable_[status.error].push_back(t.rank);  // one warning per node, below
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

  // One warning per node that could not be reached, naming its ranks.
  void ReportUnreachable() {
    for (const auto& [error, ranks] : unreachable_) {
      std::string list;
      bool any_local = false;
      for (int rank : ranks) {
        list += fmt::format("{}{}", list.empty() ? "" : ", ", rank);
        any_local = any_local || transfers_.at(rank).local_size >= 0;
      }
      report_.warnings.push_back(
          fmt::format("{}; trace{} of rank{} {} not fetched{}", error, ranks.size() == 1 ? "" : "s",
                      ranks.size() == 1 ? "" : "s", list,
                      any_local ? " (the copies already here, which may be incomplete, are merged)"
                                : " (the merge goes on without them)"));
    }
  }

 private:
  void Warn(const Transfer& t, const std::string& what) {
    report_.warnings.push_back(fmt::format("rank {}: {} not fetched: {}", t.rank, t.what, what));
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
// wrote .rank-R.json.fetch-PID is gone, so nothing will ever rename or remove them.
void RemoveAbandonedDownloads(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    auto at = name.rfind(".fetch-");
    if (name.rfind(".rank-", 0) != 0 || at == std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + at + 7));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

// One file per rank from its node into <job_dir>/<folder>/rank-R.<extension>.
TraceFetchReport FetchRankFiles(const std::string& job_dir, const JobSummary& job,
                                const std::string& cluster_file,
                                const std::map<int, std::string>& remote_files,
                                const std::string& folder, const std::string& extension,
                                const std::string& what, bool warn_missing, const SshOptions* ssh) {
  TraceFetchReport report;
  if (job.transport != "ssh" || remote_files.empty()) return report;
  ClusterSpec spec;
  spec.transport = TransportKind::kSsh;
  if (ssh) {
    spec.ssh = *ssh;
  } else if (!LoadSshOptions(job, cluster_file, spec.ssh, report)) {
    return report;
  }
  const std::string dir = job_dir + "/" + folder;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("{}: cannot create ({})", dir, ec.message()));
  RemoveAbandonedDownloads(dir);

  report.contacted = true;
  TraceDownloads downloads(report);
  std::map<std::pair<std::string, std::string>, int> node_index;  // (host, address) -> node
  std::vector<ProcessSpec> procs;
  for (const auto& [rank, remote] : remote_files) {
    auto host = job.rank_hosts.find(rank);
    auto address = job.rank_addresses.find(rank);
    NodeSpec node;
    node.host = host == job.rank_hosts.end() ? "" : host->second;
    node.address = address == job.rank_addresses.end() ? "" : address->second;
    if (node.address.empty()) node.address = node.host;
    if (node.address.empty()) continue;  // a record without a node for this rank
    auto [at, added] = node_index.emplace(std::make_pair(node.host, node.address),
                                          static_cast<int>(spec.nodes.size()));
    if (added) spec.nodes.push_back(node);

    Transfer t;
    t.rank = rank;
    t.what = what;
    t.warn_missing = warn_missing;
    t.node = fmt::format("node {} ({})", node.host, node.address);
    t.remote = remote;
    t.dest = fmt::format("{}/rank-{}.{}", dir, rank, extension);
    t.temp = fmt::format("{}/.rank-{}.{}.fetch-{}", dir, rank, extension, ::getpid());
    t.local_size = FileSize(t.dest);
    // While the job runs, a trace here may be the very file a rank is appending to (shared
    // storage, or this machine is the node): never replace it then, only fill in missing ones.
    if (t.local_size >= 0 && job.status == "running") continue;
    ProcessSpec proc;
    proc.id = rank;
    proc.node_index = at->second;
    proc.argv = {"/bin/sh",      "-c",   kFetchScript,
                 "dtrain-fetch", remote, std::to_string(t.local_size)};
    proc.cwd = "/";
    procs.push_back(std::move(proc));
    downloads.Add(std::move(t));
  }
  std::unique_ptr<Transport> transport = MakeSshTransport(spec);
  transport->Start(procs, downloads);
  while (transport->Poll(1000, downloads)) {
  }
  downloads.ReportUnreachable();
  return report;
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

}  // namespace dtrain
