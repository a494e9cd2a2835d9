// The launch's health checks of its nodes and what follows from them (node_health_checks.h).
#include "launcher/node_health_checks.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/exit_status.h"
#include "launcher/job_supervisor.h"

namespace dtrain {

// Index in the cluster's nodes of the node named `host`, -1 if none.
int NodeIndex(const ClusterSpec& spec, const std::string& host) {
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    if (spec.nodes[i].host == host) return static_cast<int>(i);
  }
  return -1;
}

void Quarantine(Job& job, int index, const std::string& why, bool may_return) {
  const std::string& host = job.spec.nodes[index].host;
  job.pool.Quarantine(index, why, may_return);
  job.record.quarantined[host] = why;
  SayQuarantined(host, job.record.name, why, may_return);
}

void TakeBack(Job& job, int index) {
  const std::string& host = job.spec.nodes[index].host;
  job.pool.Return(index);
  job.record.quarantined.erase(host);
  job.lost_nodes.erase(host);
}

void QuarantineUnfit(Job& job, int index, const std::string& why) {
  Quarantine(job, index, why, /*may_return=*/true);
  if (!job.options.drain_unfit) return;
  const std::string said =
      job.options.drain_unfit(job.spec.nodes[index], "job " + job.record.name + ": " + why);
  std::fprintf(stderr, "dtrain: %s\n", said.c_str());
  job.record.events.push_back({WallMicros(), "drained", said, ""});
}

void SayQuarantined(const std::string& host, const std::string& job, const std::string& why,
                    bool may_return) {
  std::fprintf(stderr, "dtrain: node %s quarantined %s job %s: %s\n", host.c_str(),
               may_return ? "in" : "for the rest of", job.c_str(), why.c_str());
}

// A warning of the health checks about a node (a link whose errors grow, a write that hung): said
// on the console and kept in job.json, once until the attempt is judged (the health watch finds a
// hung write each round); the job goes on.
void RecordHealthWarning(Job& job, const std::string& host, const std::string& what) {
  const auto [first, last] = job.health_warnings.equal_range(host);
  for (auto it = first; it != last; ++it) {
    if (it->second == what) return;
  }
  job.health_warnings.emplace(host, what);
  std::fprintf(stderr, "dtrain: warning: %s\n", what.c_str());
  job.record.events.push_back({WallMicros(), "health_warning", what, ""});
  WriteJobRecord(job.folder.job_dir, job.record);
}

namespace {

// `nodes` through the health check (LaunchOptions::check_nodes), `when` ("start", "restart")
// naming the moment in what is said; the unfit are quarantined. Returns the seconds it took.
double CheckNodes(Job& job, const std::vector<int>& nodes, const char* when) {
  if (!job.options.check_nodes || nodes.empty()) return 0;
  const auto start = std::chrono::steady_clock::now();
  NodeHealthFindings found;
  ClusterSpec checked = AttemptSpec(job.spec, nodes);
  // Two nodes that cannot connect are one pair, blamed on neither: a third, an idle node of the
  // pool, tells which of them is cut off (the peer test, doctor/peer_run.h).
  if (nodes.size() == 2) {
    for (int i = 0; i < job.pool.size(); ++i) {
      if (!job.pool.quarantined(i).empty() || job.unlisted.count(job.spec.nodes[i].host) ||
          std::find(nodes.begin(), nodes.end(), i) != nodes.end()) {
        continue;
      }
      checked.nodes.push_back(job.spec.nodes[i]);
      checked.nodes.back().witness = true;
      break;
    }
  }
  // Ctrl-C ends the check at once (what runs on the nodes for it is killed): the caller ends
  // the job.
  const auto interrupted = [] { return JobSupervisor::InterruptSignal() != 0; };
  try {
    found = job.options.check_nodes(checked, /*count_unreached=*/true, interrupted);
  } catch (const Error& e) {  // the check could not run at all: the job goes on unchecked
    std::fprintf(stderr, "dtrain: warning: no health check before the %s: %s\n", when, e.what());
    return 0;
  }
  const double took_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (interrupted()) {
    std::fprintf(stderr, "dtrain: health check before %s: cut short by %s after %.1f s\n", when,
                 SignalName(JobSupervisor::InterruptSignal()).c_str(), took_s);
    return took_s;
  }
  for (const auto& [host, what] : found.warnings) RecordHealthWarning(job, host, what);
  std::string names;
  for (int index : nodes) {
    auto it = found.unfit.find(job.spec.nodes[index].host);
    if (it == found.unfit.end()) continue;
    names += (names.empty() ? "" : ",") + it->first;
    QuarantineUnfit(job, index,
                    fmt::format("failed the health check before {}: {}", when, it->second));
  }
  const std::string line =
      fmt::format("health check before {}: {} node(s) in {:.1f} s, {}", when, nodes.size(), took_s,
                  names.empty() ? std::string("all fit") : "unfit: " + names);
  std::fprintf(stderr, "dtrain: %s\n", line.c_str());
  job.record.events.push_back({WallMicros(), "health_check", line, ""});
  return took_s;
}

// `nodes` through the health check, `when` naming the moment; the unfit are quarantined and the
// pool picks again (a spare in an unfit node's place, or fewer nodes with --nnodes MIN:MAX), and a
// pick with nodes new to it is checked again, all of it: the nodes' connections to each other
// are part of the check (doctor/peer_run.h), so a spare is tested with the nodes it joins.
// Returns the nodes picked (empty when the pool cannot run the job) and adds the seconds the
// checks took to `took_s`.
std::vector<int> CheckUntilAllPickedAreFit(Job& job, std::vector<int> nodes, const char* when,
                                           double& took_s) {
  std::set<int> checked;
  for (;;) {
    bool new_pick = false;
    for (int index : nodes) new_pick = checked.insert(index).second || new_pick;
    if (!new_pick) return nodes;
    took_s += CheckNodes(job, nodes, when);
    if (JobSupervisor::InterruptSignal() != 0) return nodes;  // the job ends: nothing judged
    nodes = job.pool.Pick();
    nodes.erase(std::remove_if(nodes.begin(), nodes.end(),
                               [&](int i) { return job.unlisted.count(job.spec.nodes[i].host); }),
                nodes.end());
    if (nodes.empty()) return nodes;
  }
}

}  // namespace

// Before a restart: the next attempt's nodes, those of the last attempt that were not
// quarantined and the spares (or returning nodes) the pool picks in place of the others, so that
// a spare is checked before it first runs, as before the start.
double CheckNodesBeforeRestart(Job& job) {
  double took_s = 0;
  CheckUntilAllPickedAreFit(job, job.pool.Pick(), "restart", took_s);
  return took_s;
}

std::vector<int> CheckNodesBeforeStart(Job& job, std::vector<int> nodes) {
  job.start_checked = job.options.check_nodes != nullptr;
  double took_s = 0;
  return CheckUntilAllPickedAreFit(job, std::move(nodes), "start", took_s);
}

void LeaveOutNodesWarnedOf(Job& job, bool attempt_failed) {
  if (attempt_failed) {
    for (const auto& [host, what] : job.health_warnings) {
      const int index = NodeIndex(job.spec, host);
      if (index < 0 || !job.pool.quarantined(index).empty()) continue;
      if (job.pool.CanGoOnWithout(index)) {
        Quarantine(job, index, "the health checks warned of it during the failed attempt: " + what);
      }
    }
  }
  job.health_warnings.clear();
}

}  // namespace dtrain
