// ReadJobStatus: job.json -> the nodes and how to reach them -> one rank probe (while the job
// runs) -> per rank: node, pid, state, step, idle seconds, last line.
#include "launcher/hangs/job_status.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "launcher/hangs/rank_probe.h"
#include "launcher/job_record.h"
#include "launcher/log_reader.h"
#include "launcher/rank_log.h"
#include "runtime/trace/heartbeat_vocabulary.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;
constexpr double kProbeDeadline_s = 15;

std::string Get(const std::map<std::string, std::string>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

double SecondsSinceModified(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  const double modified = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
  return static_cast<double>(WallMicros()) / 1e6 - modified;
}

// The nodes of the job and how to reach them: as job.json recorded them; SSH settings from the
// cluster file the job was launched with; for Slurm, the job (a probe is one more step in it)
// and the Slurm node each node was placed on. Empty when the transport cannot be driven from
// here.
std::optional<ClusterSpec> SpecFor(const JobSummary& job, std::map<std::string, std::string>& why) {
  ClusterSpec spec;
  if (job.transport == "local") {
    spec.transport = TransportKind::kLocal;
    NodeSpec node;
    node.host = job.rank_hosts.empty() ? "localhost" : job.rank_hosts.begin()->second;
    spec.nodes.push_back(node);  // every rank is on this machine: one probe sees them all
    return spec;
  }
  if (job.transport == "slurm") {
    if (!job.slurm.placed || job.slurm.job_id.empty()) {
      why["(all)"] =
          "job.json names no Slurm job (a dtrain older than this one wrote it); state from the "
          "job's files only";
      return std::nullopt;
    }
    spec.transport = TransportKind::kSlurm;
    spec.slurm_placement = job.slurm;
  } else if (job.transport == "ssh") {
    spec.transport = TransportKind::kSsh;
    std::string file = job.cluster_file;
    if (!file.empty() && fs::path(file).is_relative() && !job.launch_dir.empty())
      file = (fs::path(job.launch_dir) / file).string();
    if (!file.empty() && fs::exists(file)) {
      try {
        spec.ssh = ParseClusterFile(file).ssh;
      } catch (const Error& e) {
        why["(all)"] = std::string("ssh settings: ") + e.what();
      }
    }
  } else {
    why["(all)"] =
        "the " + job.transport +
        " transport is not probed from another terminal; state from the job's files only";
    return std::nullopt;
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& [rank, host] : job.rank_hosts) {
    auto address = job.rank_addresses.find(rank);
    NodeSpec node;
    node.host = host;
    node.address =
        address == job.rank_addresses.end() || address->second.empty() ? host : address->second;
    if (auto machine = job.node_machines.find(host); machine != job.node_machines.end())
      node.machine = machine->second;
    if (seen.insert({node.host, node.address}).second) spec.nodes.push_back(node);
  }
  return spec;
}

std::string StateWord(char state) {
  switch (state) {
    case 'R':
      return "running";
    case 'S':
      return "sleeping";
    case 'D':
      return "disk-wait";
    case 'T':
      return "stopped";
    case 't':
      return "traced";
    case 'Z':
      return "zombie";
    default:
      return std::string(1, state);
  }
}

}  // namespace

JobStatus ReadJobStatus(const StatusOptions& options) {
  const std::string log_dir = options.log_dir.empty() ? DefaultLogDir() : options.log_dir;
  const std::string job_dir = ResolveJobDir(log_dir, options.job);
  const JobSummary job = ReadJobSummary(job_dir);
  JobStatus status;
  status.job = job.name;
  status.job_dir = job_dir;
  status.status = EffectiveStatus(job);
  status.transport = job.transport;
  status.exit_code = job.exit_code;
  status.stall_timeout_s = job.stall_timeout_s;
  for (const JobEvent& e : job.events) {
    if (e.kind == "stall" && !e.file.empty()) status.stall_reports.push_back(e.file);
    if (e.kind == "health_warning") status.health_warnings.push_back(e.text);
    if (e.kind == "elastic_round") status.elastic_rounds.push_back(e.text);
    if (e.kind == "straggler") status.stragglers.push_back(e.text);
    if (e.kind == "held_back") status.held_back.push_back(e.text);
    if (e.kind == "waiting_for_nodes" && job.status == "waiting") {
      status.waiting_for_nodes = e.text;
      status.waiting_since_us = e.time_us;
    }
  }
  if (job.attempts.size() > 1) {
    for (size_t i = 0; i < job.attempts.size(); ++i) {
      const JobAttempt* next = i + 1 < job.attempts.size() ? &job.attempts[i + 1] : nullptr;
      status.attempts.push_back(DescribeAttempt(job.attempts[i], next));
    }
  }
  status.quarantined = job.quarantined;

  ProbeResult probe;
  if (job.status == "running") {
    if (std::optional<ClusterSpec> spec = SpecFor(job, status.node_errors)) {
      probe = RankProbe::RunToEnd(*spec, ProbeRequest{job.name, false, "", job.rank_job_dir},
                                  kProbeDeadline_s);
      for (const auto& [host, error] : probe.node_errors) status.node_errors[host] = error;
    }
  }
  for (const auto& [rank, host] : job.rank_hosts) {
    RankStatus r;
    r.rank = rank;
    r.host = host;
    const std::string log = RankLogPath(job_dir, rank);
    std::vector<std::string> last = LastLines(log, 1);
    if (!last.empty()) r.last_line = last.back();
    r.idle_s = SecondsSinceModified(log);
    if (auto exit = job.rank_exits.find(rank); exit != job.rank_exits.end()) {
      r.state = exit->second;
    } else if (auto found = probe.ranks.find(rank);
               found != probe.ranks.end() && found->second.main()) {
      const RankFacts& f = found->second;
      r.pid = f.main()->pid;
      r.state = StateWord(f.main()->state);
      r.cpu_s = f.cpu_s;
      if (!f.heartbeat.empty()) {
        r.step = Get(f.heartbeat, heartbeat::kStep);
        r.activity = Get(f.heartbeat, heartbeat::kCollectiveState) == heartbeat::kWaiting
                         ? Get(f.heartbeat, heartbeat::kCollective) + " #" +
                               Get(f.heartbeat, heartbeat::kCollectiveSeq)
                         : Get(f.heartbeat, heartbeat::kActivity);
        // The heartbeat says how long the rank has been in what it does now.
        const double in_activity = std::atof(Get(f.heartbeat, heartbeat::kActivitySeconds).c_str());
        r.idle_s = std::max(0.0, f.heartbeat_age_s) + in_activity;
      }
    } else {
      r.state = job.status == "running" ? "not found"
                : job.attempts.empty()  ? "not started"  // it waits for nodes to start
                                        : "ended";
    }
    status.ranks.push_back(std::move(r));
  }
  return status;
}

void PrintJobStatus(const JobStatus& s, bool json, std::FILE* out) {
  if (json) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const RankStatus& r : s.ranks) {
      ranks.push_back(
          {{"rank", r.rank},
           {"node", r.host},
           {"pid", r.pid > 0 ? nlohmann::json(r.pid) : nlohmann::json(nullptr)},
           {"state", r.state},
           {"step",
            r.step.empty() ? nlohmann::json(nullptr) : nlohmann::json(std::atoll(r.step.c_str()))},
           {"activity", r.activity},
           {"idle_s", r.idle_s < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.idle_s)},
           {"cpu_s", r.cpu_s < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.cpu_s)},
           {"last_line", r.last_line}});
    }
    nlohmann::json doc = {
        {"job", s.job},
        {"job_dir", s.job_dir},
        {"status", s.status},
        {"transport", s.transport},
        {"exit_code", s.exit_code < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.exit_code)},
        {"stall_timeout_s", s.stall_timeout_s},
        {"stall_reports", s.stall_reports},
        {"node_errors", s.node_errors},
        {"attempts", s.attempts},
        {"quarantined", s.quarantined},
        {"health_warnings", s.health_warnings},
        {"elastic_rounds", s.elastic_rounds},
        {"stragglers", s.stragglers},
        {"held_back", s.held_back},
        {"waiting_for_nodes", s.waiting_for_nodes.empty() ? nlohmann::json(nullptr)
                                                          : nlohmann::json(s.waiting_for_nodes)},
        {"ranks", ranks}};
    std::fprintf(out, "%s\n", doc.dump(2).c_str());
    return;
  }
  std::fprintf(out, "job %s: %s%s (%s), %s\n", s.job.c_str(), s.status.c_str(),
               s.exit_code >= 0 ? fmt::format(", exit {}", s.exit_code).c_str() : "",
               s.transport.c_str(), s.job_dir.c_str());
  if (!s.waiting_for_nodes.empty()) {
    std::fprintf(out, "waiting for nodes for %.0f s: %s\n",
                 std::max<int64_t>(0, WallMicros() - s.waiting_since_us) / 1e6,
                 s.waiting_for_nodes.c_str());
  }
  for (const auto& [host, error] : s.node_errors)
    std::fprintf(out, "node %s: %s\n", host.c_str(), error.c_str());
  std::fprintf(out, "%-5s %-12s %8s %-22s %8s %7s  %s\n", "rank", "node", "pid", "state", "step",
               "idle_s", "last line");
  for (const RankStatus& r : s.ranks) {
    std::string state = r.state + (r.activity.empty() ? "" : " " + r.activity);
    std::string line = r.last_line.size() > 100 ? r.last_line.substr(0, 97) + "..." : r.last_line;
    std::fprintf(out, "%-5d %-12s %8s %-22s %8s %7s  %s\n", r.rank, r.host.c_str(),
                 r.pid > 0 ? std::to_string(r.pid).c_str() : "-", state.c_str(),
                 r.step.empty() ? "-" : r.step.c_str(),
                 r.idle_s < 0 ? "-" : fmt::format("{:.0f}", r.idle_s).c_str(), line.c_str());
  }
  for (const std::string& report : s.stall_reports)
    std::fprintf(out, "stall report: %s\n", report.c_str());
  for (const std::string& attempt : s.attempts) std::fprintf(out, "%s\n", attempt.c_str());
  for (const std::string& round : s.elastic_rounds)
    std::fprintf(out, "elastic: %s\n", round.c_str());
  for (const std::string& straggler : s.stragglers)
    std::fprintf(out, "%s\n", straggler.c_str());  // "straggler: rank 1 on node b: ..."
  for (const std::string& held : s.held_back)
    std::fprintf(out, "%s\n", held.c_str());  // "node node1 held back as a spare ..."
  for (const auto& [host, why] : s.quarantined)
    std::fprintf(out, "node %s quarantined: %s\n", host.c_str(), why.c_str());
  for (const std::string& warning : s.health_warnings)
    std::fprintf(out, "warning: %s\n", warning.c_str());
}

}  // namespace dtrain
