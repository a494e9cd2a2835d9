// job.json as nlohmann::json, written to a temporary file and renamed into place.
#include "launcher/job_record.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "launcher/error.h"
#include "launcher/file_replace.h"
#include "launcher/this_machine.h"

namespace dtrain {
namespace {

using nlohmann::json;

std::string IsoTime(int64_t micros) {
  if (micros <= 0) return "";
  std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

json OptionalInt(int value) {
  return value < 0 ? json(nullptr) : json(value);
}

json StatusJson(const ExitStatus& status) {
  return {{"status", status.Describe()},
          {"exit_code", status.ShellStatus()},
          {"code", status.code},
          {"signal", status.signal},
          {"error", status.error}};
}

// An integer member of `object`, or `fallback` when it is missing or not an integer: a float
// such as 1e20 need not fit, and converting one that does not is undefined.
template <class T>
T IntegerOr(const json& object, const char* key, T fallback) {
  if (!object.is_object()) return fallback;
  const auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<T>() : fallback;
}

}  // namespace

std::string DescribeAttempt(const JobAttempt& a, const JobAttempt* next) {
  std::string nodes;
  for (const std::string& n : a.nodes) nodes += (nodes.empty() ? "" : ",") + n;
  std::string text = fmt::format("attempt {} on {}: ", a.restart_count + 1,
                                 nodes.empty() ? std::string("?") : nodes);
  if (a.exit_code < 0) return text + "running";
  if (a.cause.empty()) return text + "succeeded";
  text += a.cause;
  if (!a.blamed_node.empty()) text += fmt::format(" (node {} blamed)", a.blamed_node);
  if (!a.detail.empty()) text += ": " + a.detail;
  if (next && a.fault_us) {
    // "not seen" only where steps were seen before the fault: a job that writes no step
    // metrics the launcher can read (not dtrain-clip, or its metrics elsewhere) says nothing.
    if (next->first_step_us) {
      text += fmt::format("; next attempt's first step {:.1f} s after the fault",
                          (next->first_step_us - a.fault_us) / 1e6);
    } else if (a.last_step >= 0) {
      text += "; next attempt's first step not seen";
    }
    const int64_t lost = StepsLost(a, *next);
    if (lost >= 0) text += fmt::format(", {} step(s) lost", lost);
  }
  return text;
}

int64_t StepsLost(const JobAttempt& a, const JobAttempt& next) {
  if (a.last_step < 0 || next.first_step < 1) return -1;
  return std::max<int64_t>(0, a.last_step - (next.first_step - 1));
}

std::string JobRecordPath(const std::string& job_dir) {
  return job_dir + "/job.json";
}

namespace {

std::string JobRecordJson(const JobRecord& r) {
  json nodes = json::array();
  for (const NodeSpec& n : r.nodes) {
    json node = {{"host", n.host}, {"address", n.address}, {"slots", n.slots}, {"gpus", n.gpus}};
    if (!n.machine.empty()) node["machine"] = n.machine;  // the Slurm node it was placed on
    if (n.spare) node["spare"] = true;
    if (auto q = r.quarantined.find(n.host); q != r.quarantined.end()) {
      node["quarantined"] = q->second;
    }
    if (auto clock = r.node_clocks.find(n.host); clock != r.node_clocks.end()) {
      node["clock_offset_us"] = clock->second.offset_us;  // the launcher's clock minus the node's
      node["clock_rtt_us"] = clock->second.rtt_us;        // the round trip it was measured in
    }
    nodes.push_back(node);
  }
  json ranks = json::array();
  for (const RankSlot& s : r.plan.ranks) {
    json rank = {{"rank", s.rank},           {"local_rank", s.local_rank},
                 {"node_rank", s.node_rank}, {"local_world_size", s.local_world_size},
                 {"host", s.host},           {"address", s.address}};
    if (auto trace = s.env.find("DTRAIN_TIMELINE"); trace != s.env.end()) {
      rank["timeline"] = trace->second;  // the path as the rank saw it, on its node
    }
    auto it = r.rank_status.find(s.rank);
    rank["exit"] = it == r.rank_status.end() ? json(nullptr) : StatusJson(it->second);
    ranks.push_back(rank);
  }
  json attempts = json::array();
  for (const JobAttempt& a : r.attempts) {
    attempts.push_back(
        {{"restart_count", a.restart_count},
         {"started", IsoTime(a.started_us)},
         {"started_us", a.started_us},
         {"ended", IsoTime(a.ended_us)},
         {"ended_us", a.ended_us},
         {"exit_code", OptionalInt(a.exit_code)},
         {"failed_rank", OptionalInt(a.failed_rank)},
         {"nodes", a.nodes},
         {"cause", a.cause.empty() ? json(nullptr) : json(a.cause)},
         {"blamed_node", a.blamed_node.empty() ? json(nullptr) : json(a.blamed_node)},
         {"detail", a.detail},
         {"fault_us", a.fault_us ? json(a.fault_us) : json(nullptr)},
         {"first_step_us", a.first_step_us ? json(a.first_step_us) : json(nullptr)},
         {"first_step", a.first_step >= 0 ? json(a.first_step) : json(nullptr)},
         {"last_step", a.last_step >= 0 ? json(a.last_step) : json(nullptr)}});
    if (attempts.size() >= 2) {  // the fault before it, to this attempt's first step
      const JobAttempt& before = r.attempts[attempts.size() - 2];
      json& failed = attempts[attempts.size() - 2];
      if (before.fault_us && a.first_step_us) {
        failed["recovery_s"] = (a.first_step_us - before.fault_us) / 1e6;
      }
      if (const int64_t lost = StepsLost(before, a); lost >= 0) failed["steps_lost"] = lost;
    }
  }
  json events = json::array();
  for (const JobEvent& e : r.events) {
    events.push_back({{"time", IsoTime(e.time_us)},
                      {"time_us", e.time_us},
                      {"kind", e.kind},
                      {"text", e.text},
                      {"file", e.file}});
  }
  json doc = {{"job", r.name},
              {"status", r.status},
              {"exit_code", OptionalInt(r.exit_code)},
              {"failed_rank", OptionalInt(r.failed_rank)},
              {"cluster", r.cluster_source},
              {"cluster_name", r.cluster_name},
              {"transport", r.transport},
              {"command", r.command},
              {"launch_dir", r.launch_dir},
              {"log_dir", r.log_dir},
              {"launcher", {{"host", ThisHostName()}, {"pid", static_cast<int>(::getpid())}}},
              {"started", IsoTime(r.started_us)},
              {"started_us", r.started_us},
              {"ended", IsoTime(r.ended_us)},
              {"ended_us", r.ended_us},
              {"max_restarts", r.max_restarts},
              {"restarts", r.attempts.empty() ? 0 : static_cast<int>(r.attempts.size()) - 1},
              {"timeline", r.timeline},
              {"world_size", r.plan.world_size},
              {"master_addr", r.plan.master_addr},
              {"master_port", r.plan.master_port},
              {"nodes", nodes},
              {"ranks", ranks},
              {"attempts", attempts},
              {"stall_timeout_s", r.stall_timeout_s},
              {"on_stall", r.on_stall},
              {"node_timeout_s", r.node_timeout_s},
              {"events", events}};
  if (r.slurm.placed) doc["slurm"] = {{"job_id", r.slurm.job_id}, {"job_name", r.slurm.job_name}};
  // Arguments and names that are not UTF-8 are kept in the record as U+FFFD; the rank itself
  // gets them byte for byte.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

namespace {

// The record was written: after a refused write, said, and the refusal forgotten.
void WrittenAgain(const std::string& job_dir, JobRecord& r) {
  if (r.unwritten.empty()) return;
  std::fprintf(stderr, "dtrain: the job record %s is written again\n",
               JobRecordPath(job_dir).c_str());
  r.unwritten.clear();
}

}  // namespace

void WriteFirstJobRecord(const std::string& job_dir, JobRecord& record) {
  try {
    ReplaceFile(JobRecordPath(job_dir), JobRecordJson(record), "the job record");
  } catch (const Error& e) {
    throw Error(
        fmt::format("{}; nothing was started: free space there, or give the job's "
                    "folder another disk (--log-dir)",
                    e.what()));
  }
  WrittenAgain(job_dir, record);  // after a refused write while it waited for nodes
}

void WriteJobRecord(const std::string& job_dir, JobRecord& r) {
  constexpr const char* kGoesOn =
      "the job goes on, and its record is written whole once the disk takes it (until then "
      "job.json tells of the job as it was)";
  if (r.writer) {
    r.writer->Replace(JobRecordPath(job_dir), JobRecordJson(r), "the job record", kGoesOn);
    return;
  }
  try {
    ReplaceFile(JobRecordPath(job_dir), JobRecordJson(r), "the job record");
  } catch (const Error& e) {
    if (r.unwritten.empty()) std::fprintf(stderr, "dtrain: warning: %s; %s\n", e.what(), kGoesOn);
    r.unwritten = e.what();
    return;
  }
  WrittenAgain(job_dir, r);
}

JobSummary ReadJobSummary(const std::string& job_dir) {
  const std::string path = JobRecordPath(job_dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the job record: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseJobSummary(text.str(), path);
}

JobSummary ParseJobSummary(const std::string& text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(text);
    JobSummary s;
    s.name = doc.at("job").get<std::string>();
    s.status = doc.at("status").get<std::string>();
    s.command = doc.value("command", std::vector<std::string>{});
    s.started_us = IntegerOr(doc, "started_us", int64_t{0});
    s.ended_us = IntegerOr(doc, "ended_us", int64_t{0});
    s.exit_code = IntegerOr(doc, "exit_code", -1);
    s.failed_rank = IntegerOr(doc, "failed_rank", -1);
    s.restarts = IntegerOr(doc, "restarts", 0);
    if (doc.contains("launcher")) {
      s.launcher_host = doc["launcher"].value("host", "");
      s.launcher_pid = IntegerOr(doc["launcher"], "pid", 0);
    }
    s.transport = doc.value("transport", "");
    s.cluster_file = doc.value("cluster", "");
    s.launch_dir = doc.value("launch_dir", "");
    const bool timeline = doc.value("timeline", false);
    if (!doc.value("log_dir", "").empty()) {
      s.rank_job_dir = fmt::format("{}/{}", doc.value("log_dir", ""), s.name);
      s.trace_dir = s.rank_job_dir + "/timeline";
    }
    std::map<std::string, int64_t> node_offsets;
    for (const json& node : doc.value("nodes", json::array())) {
      if (node.contains("clock_offset_us") && node["clock_offset_us"].is_number_integer()) {
        node_offsets[node.value("host", "")] = node["clock_offset_us"].get<int64_t>();
      }
      if (!node.value("machine", "").empty()) {
        s.node_machines[node.value("host", "")] = node.value("machine", "");
      }
    }
    for (const json& rank : doc.value("ranks", json::array())) {
      const int r = IntegerOr(rank, "rank", -1);
      if (r < 0) throw Error(path + ": a rank entry without a rank number");
      s.rank_hosts[r] = rank.value("host", "");
      s.rank_addresses[r] = rank.value("address", "");
      if (rank.contains("exit") && rank["exit"].is_object()) {
        s.rank_exits[r] = rank["exit"].value("status", "");
      }
      // Records written before "timeline" was kept per rank: the path the rank plan gives.
      std::string trace = rank.value("timeline", "");
      if (trace.empty() && timeline) {
        trace = fmt::format("{}/{}/timeline/rank-{}.json", doc.value("log_dir", ""), s.name, r);
      }
      if (!trace.empty()) s.rank_traces[r] = trace;
      s.rank_metrics[r] =
          fmt::format("{}/{}/metrics/rank-{}.jsonl", doc.value("log_dir", ""), s.name, r);
      if (auto offset = node_offsets.find(s.rank_hosts[r]); offset != node_offsets.end()) {
        s.rank_clock_offsets_us[r] = offset->second;
      }
    }
    if (doc.contains("slurm") && doc["slurm"].is_object()) {
      s.slurm = {true, doc["slurm"].value("job_id", ""), doc["slurm"].value("job_name", "")};
    }
    s.stall_timeout_s = doc.value("stall_timeout_s", 0.0);
    for (const json& a : doc.value("attempts", json::array())) {
      JobAttempt at;
      at.restart_count = IntegerOr(a, "restart_count", 0);
      at.started_us = IntegerOr(a, "started_us", int64_t{0});
      at.ended_us = IntegerOr(a, "ended_us", int64_t{0});
      at.exit_code = IntegerOr(a, "exit_code", -1);
      at.failed_rank = IntegerOr(a, "failed_rank", -1);
      at.nodes = a.value("nodes", std::vector<std::string>{});
      if (a.contains("cause") && a["cause"].is_string()) at.cause = a["cause"].get<std::string>();
      if (a.contains("blamed_node") && a["blamed_node"].is_string())
        at.blamed_node = a["blamed_node"].get<std::string>();
      at.detail = a.value("detail", "");
      at.fault_us = IntegerOr(a, "fault_us", int64_t{0});
      at.first_step_us = IntegerOr(a, "first_step_us", int64_t{0});
      at.first_step = IntegerOr(a, "first_step", int64_t{-1});
      at.last_step = IntegerOr(a, "last_step", int64_t{-1});
      s.attempts.push_back(std::move(at));
    }
    for (const json& node : doc.value("nodes", json::array())) {
      if (node.contains("quarantined") && node["quarantined"].is_string())
        s.quarantined[node.value("host", "")] = node["quarantined"].get<std::string>();
    }
    for (const json& e : doc.value("events", json::array())) {
      s.events.push_back({IntegerOr(e, "time_us", int64_t{0}), e.value("kind", ""),
                          e.value("text", ""), e.value("file", "")});
    }
    return s;
  } catch (const json::exception& e) {
    throw Error(path + ": not a job record: " + e.what());
  }
}

std::string NewJobName() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  std::random_device random;
  return fmt::format("{}-{:04x}", stamp, random() & 0xffff);
}

void CheckJobName(const std::string& name) {
  bool ok = !name.empty() && name[0] != '.' && name.size() <= 200;
  for (char c : name) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    throw UsageError("job name '" + name +
                     "': expected letters, digits, '.', '_' or '-' (not starting with '.')");
  }
}

void PointLatestAt(const std::string& log_dir, const std::string& name) {
  const std::string link = log_dir + "/latest";
  const std::string tmp = fmt::format("{}/.latest-{}", log_dir, ::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(name.c_str(), tmp.c_str()) != 0 || std::rename(tmp.c_str(), link.c_str()) != 0) {
    throw Error(link + ": cannot point it at " + name + ": " + std::strerror(errno));
  }
}

std::string DefaultLogDir() {
  try {
    return LoadClusterOrDefault("").log_dir;
  } catch (const Error&) {
    // A broken cluster file is reported by the commands that run jobs; logs still work.
    return ClusterSpec().log_dir;
  }
}

}  // namespace dtrain
