#include "launcher/node_return_wait.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/error.h"
#include "launcher/health_watch.h"
#include "launcher/job_placement.h"
#include "launcher/job_record.h"
#include "launcher/job_supervisor.h"
#include "launcher/node_health_checks.h"
#include "launcher/rank_log.h"

namespace dtrain {

bool MayWaitForNodes(const JobSettings& settings) {
  return settings.health_watch_s > 0;
}

namespace {

using Clock = std::chrono::steady_clock;

// Says `waiting` on the console and in job.json (status waiting, event waiting_for_nodes), then
// health-checks the nodes that may return, with the job's nodes as witnesses, and takes back each
// that passes kReturnRounds rounds in a row, until `enough` holds for the nodes the pool picks
// then (returned), `timeout_s` runs out ({}), none may return any more ({}) or the user
// interrupts ({}). `waited_s`: how long it took.
std::vector<int> WatchReturns(Job& job, const std::string& waiting, double timeout_s,
                              const std::function<bool(const std::vector<int>&)>& enough,
                              double& waited_s) {
  // Ctrl-C ends the wait as interrupted: the launch's InterruptHandlers (launch.cpp) set the flag.
  std::fprintf(stderr, "dtrain: %s\n", waiting.c_str());
  // `dtrain status` says so meanwhile; the status is settled by whoever ends the wait.
  job.record.status = "waiting";
  job.record.events.push_back({WallMicros(), "waiting_for_nodes", waiting, ""});
  WriteJobRecord(job.folder.job_dir, job.record);
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1000));
  std::unique_ptr<HealthWatch> watch;
  std::vector<int> watched;
  auto since = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  while (Clock::now() < deadline && JobSupervisor::InterruptSignal() == 0) {
    const std::vector<int> may_return = job.pool.MayReturn();
    if (may_return.empty()) break;  // every node that could return did, or came back once
    if (may_return != watched) {
      watched = may_return;
      // Tested with the nodes the job has (ReturnWatchNodes): those not quarantined.
      std::vector<int> in_job;
      for (int i = 0; i < job.pool.size(); ++i) {
        if (job.pool.quarantined(i).empty()) in_job.push_back(i);
      }
      watch = std::make_unique<HealthWatch>(
          job.options.check_nodes, ReturnWatchNodes(job.spec, may_return, in_job),
          job.settings.health_watch_s, /*checked=*/false, WatchFor::kReturns);
    }
    if (std::optional<std::string> host = watch->TakeReturned()) {
      TakeBack(job, NodeIndex(job.spec, *host));
      const std::string detail = fmt::format(
          "node {} passed the health checks {} rounds in a row after {:.1f} s of the "
          "wait; it takes part again",
          *host, kReturnRounds, since());
      std::fprintf(stderr, "dtrain: %s\n", detail.c_str());
      job.record.events.push_back({WallMicros(), "node_returned", detail, ""});
      WriteJobRecord(job.folder.job_dir, job.record);
      watched.clear();  // a fresh watch for those still out
      std::vector<int> picked = job.pool.Pick();
      if (!picked.empty() && enough(picked)) {
        job.record.status = "running";
        waited_s = since();
        return picked;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  waited_s = since();
  return {};
}

}  // namespace

std::vector<int> WaitForReturningNodes(Job& job, double& waited_s) {
  waited_s = 0;
  if (!MayWaitForNodes(job.settings) || job.pool.MayReturn().empty()) return {};
  const std::string waiting = fmt::format(
      "job {} is short of nodes ({}): it waits up to {:g} s ({}) for a quarantined node to pass "
      "the health checks {} rounds in a row",
      job.record.name, job.pool.why_not(), job.settings.join_timeout_s,
      job.settings.join_timeout_named, kReturnRounds);
  return WatchReturns(
      job, waiting, job.settings.join_timeout_s, [](const std::vector<int>&) { return true; },
      waited_s);
}

std::vector<int> WaitLastCall(Job& job, const std::vector<int>& nodes, const std::string& before,
                              double& waited_s) {
  waited_s = 0;
  const int max_nodes = job.pool.max_nodes();
  const std::vector<int> may_return = job.pool.MayReturn();
  if (job.settings.last_call_s <= 0 || !MayWaitForNodes(job.settings) || may_return.empty() ||
      static_cast<int>(nodes.size()) >= max_nodes) {
    return nodes;
  }
  std::vector<std::string> hosts;
  for (int i : may_return) hosts.push_back(job.spec.nodes[i].host);
  const std::string waiting = fmt::format(
      "job {} has {} of its {} nodes (--nnodes {}:{}): before it {}, it waits up to {:g} s "
      "(torchrun's last_call_timeout, --rdzv-conf last_call_timeout=S) for {} to pass the health "
      "checks {} rounds in a row",
      job.record.name, nodes.size(), max_nodes, job.pool.min_nodes(), max_nodes, before,
      job.settings.last_call_s, fmt::join(hosts, ", "), kReturnRounds);
  const std::string status = job.record.status;
  auto has_max = [&](const std::vector<int>& p) { return static_cast<int>(p.size()) >= max_nodes; };
  const bool full =
      !WatchReturns(job, waiting, job.settings.last_call_s, has_max, waited_s).empty();
  job.record.status = status;
  // The nodes it had stay healthy, so the pool picks them again, with those that came back.
  const std::vector<int> picked = job.pool.Pick();
  if (!full && JobSupervisor::InterruptSignal() == 0) {
    std::fprintf(stderr,
                 "dtrain: job %s %s on %zu of its %d nodes: no more came back within %g s "
                 "(torchrun's last_call_timeout)\n",
                 job.record.name.c_str(), before.c_str(), picked.size(), max_nodes,
                 job.settings.last_call_s);
  }
  WriteJobRecord(job.folder.job_dir, job.record);
  return picked;
}

std::vector<int> WaitForNodesAtStart(Job& job, bool after_check, bool unreached) {
  double waited_s = 0;
  // An elastic job's --host-discovery-script has waited for its nodes already.
  std::vector<int> nodes;
  if (unreached && !job.discovery) nodes = WaitForReturningNodes(job, waited_s);
  job.waited_at_start = true;
  if (!nodes.empty()) return nodes;
  std::string message = "job " + job.record.name + " cannot start: " + job.pool.why_not() +
                        (after_check ? " after the health check" : "");
  int exit_code = kExitFailure;
  if (const int signal = JobSupervisor::InterruptSignal()) {
    message += fmt::format(
        ", and it was interrupted by {} while it waited for nodes; no rank was "
        "started",
        SignalName(signal));
    exit_code = 128 + signal;
  } else {
    if (waited_s > 0) {
      message += fmt::format(", and no node came back within {:g} s ({})",
                             job.settings.join_timeout_s, job.settings.join_timeout_named);
    }
    std::vector<std::string> remedies = {"Fix or replace the node(s)", "give spares (--spares N)",
                                         "let the job run on fewer nodes (--nnodes MIN:MAX)"};
    if (unreached) {
      remedies.push_back(MayWaitForNodes(job.settings)
                             ? "wait longer for them (" + job.settings.join_timeout_option + ")"
                             : std::string("let it wait for them (--health-watch S)"));
    }
    if (after_check) remedies.push_back("leave the check out (--start-health-check off)");
    const std::string last = remedies.back();
    remedies.pop_back();
    message += fmt::format("; no rank was started. {} or {}", fmt::join(remedies, ", "), last);
  }
  RecordFailureBeforeStart(job.folder.job_dir, job.record, exit_code);
  throw Error(message, exit_code);
}

}  // namespace dtrain
