// RunAttempt (job_attempt.h): an attempt planned, its store and rendezvous started, its ranks
// supervised. EndAttempt is in job_attempt_end.cpp.
#include "launcher/job_attempt.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/error.h"
#include "launcher/exit_abort_note.h"
#include "launcher/hangs/stall_watch.h"
#include "launcher/horovod_elastic_leaves.h"
#include "launcher/horovod_elastic_rounds.h"
#include "launcher/horovod_rendezvous.h"
#include "launcher/job_store.h"
#include "launcher/log_reader.h"
#include "launcher/node_health_checks.h"
#include "launcher/oom_kill.h"
#include "launcher/rank_command.h"
#include "launcher/rank_error_file.h"
#include "launcher/step_watch.h"
#include "launcher/straggler_leaves.h"
#include "launcher/timeline/trace_fetch.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

void MakeErrorFolder(const std::string& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) throw Error(path + ": cannot create the directory: " + error.message());
}

// One process per rank, each running `command` (rank_command.h).
std::vector<ProcessSpec> ProcessesFor(const RankPlan& plan,
                                      const std::vector<std::string>& command) {
  std::vector<ProcessSpec> procs;
  for (const RankSlot& slot : plan.ranks) {
    ProcessSpec spec;
    spec.id = slot.rank;
    spec.node_index = slot.node_rank;
    spec.argv = command;
    spec.env = slot.env;
    spec.python_path_head = slot.python_path_head;
    procs.push_back(std::move(spec));
  }
  return procs;
}

// Logs for every rank of the plan (a restart on bigger nodes has more), and the console's ranks.
void PrepareLogs(Job& job) {
  std::map<int, ConsoleRank> ranks;
  for (const RankSlot& slot : job.record.plan.ranks) {
    if (!job.logs.count(slot.rank)) {
      job.logs[slot.rank] = std::make_unique<RankLog>(job.folder.job_dir, slot.rank);
      if (job.log_sync) job.log_sync->Watch(slot.rank, job.logs[slot.rank]->path());
    }
    ranks[slot.rank] = {slot.host, slot.local_rank};
  }
  job.console.SetRanks(std::move(ranks));
}

// From now on rank 0 hosts the job's store: said once, with why.
void StoreFailed(Job& job, const ClusterSpec& spec, const std::string& program,
                 const std::string& why) {
  std::fprintf(stderr,
               "dtrain: note: the job's TCPStore did not start with %s on node %s: %s; "
               "rank 0 hosts it\n",
               program.c_str(), spec.nodes.front().host.c_str(), why.c_str());
  job.store_failed = true;
}

// The job's TCPStore when the job is a Python program (JobPython) or dtrain-clip, started with
// its Python or dtrain-clip on node 0 at the rendezvous (JobStoreCommand; on Slurm a step of
// its own beside the ranks'); null (rank 0 hosts the store, as before) when it is neither, when
// the user set TORCHELASTIC_USE_AGENT_STORE to anything but True, or when the store could not
// start there (said once). A Python store listens while the ranks start (job_store.h).
std::unique_ptr<JobStore> StartJobStore(Job& job, const ClusterSpec& spec, const RankPlan& plan,
                                        int attempt) {
  const std::vector<std::string> command =
      JobStoreCommand(job.settings.command, spec, plan.master_addr, plan.master_port);
  // An elastic Horovod job must outlive its first node, and Horovod has its own rendezvous.
  if (command.empty() || job.store_failed || job.settings.min_np > 0) return nullptr;
  const std::string& python = command.front();  // the job's Python, or dtrain-clip
  // -x TORCHELASTIC_USE_AGENT_STORE=False (or the cluster file's env) keeps rank 0 the host.
  auto asked = spec.env.find("TORCHELASTIC_USE_AGENT_STORE");
  if (asked != spec.env.end() && asked->second != "True") return nullptr;
  auto store =
      std::make_unique<JobStore>(spec, command, kStoreStartTimeoutS, job.settings.node_timeout_s);
  if (store->started()) {
    if (attempt == 0) {
      std::fprintf(stderr, "dtrain: the job's TCPStore on %s:%d (%s on node %s)\n",
                   plan.master_addr.c_str(), plan.master_port, python.c_str(),
                   spec.nodes.front().host.c_str());
    }
    return store;
  }
  StoreFailed(job, spec, python, store->why());
  return nullptr;
}

}  // namespace

ClusterSpec AttemptSpec(const ClusterSpec& spec, const std::vector<int>& picked) {
  ClusterSpec attempt = spec;
  attempt.nodes.clear();
  for (int i : picked) attempt.nodes.push_back(spec.nodes[i]);
  return attempt;
}

namespace {

JobOutcome RunAttemptOnce(Job& job, int attempt, const ClusterSpec& spec,
                          std::map<int, uint64_t>& log_start) {
  JobRecord& record = job.record;
  job.plan_options.restart_count = attempt;
  record.plan = MakeRankPlan(spec, job.plan_options);
  const std::string errors = fmt::format("{}/errors/attempt-{}", job.folder.job_dir, attempt);
  if (attempt == 0) {
    MakeErrorFolder(errors);
  } else {  // a drive that hangs holds the folder, not the restart
    job.files->MakeFolder(errors, "the ranks' error files of this attempt cannot be kept");
  }
  // The job's TCPStore, ended after this attempt's last rank (at this function's end).
  std::unique_ptr<JobStore> store = StartJobStore(job, spec, record.plan, attempt);
  if (store) {
    job.plan_options.agent_store = true;
    record.plan = MakeRankPlan(spec, job.plan_options);
    job.plan_options.agent_store = false;
  }
  PrepareLogs(job);
  // A fresh store for every attempt, as horovodrun's init(host_alloc_plan); gone with it. Served
  // for every job, so a Horovod program starts without --horovod (a thread and a socket).
  // An elastic job's rounds (--min-np): declared first, the rendezvous serves them.
  std::unique_ptr<HorovodElasticRounds> elastic;
  if (job.settings.min_np > 0) {
    elastic = std::make_unique<HorovodElasticRounds>(
        record.plan, job.settings.min_np, job.settings.reset_limit, job.settings.max_np,
        std::chrono::seconds(job.settings.nodes_wait_s));
    for (RankSlot& slot : record.plan.ranks) slot.env["HOROVOD_ELASTIC"] = "1";
  }
  auto horovod_rendezvous = std::make_unique<HorovodRendezvous>(
      job.horovod_network.bind_address, HorovodScopeSizes(record.plan), elastic.get());
  AddHorovodGlooEnv(record.plan, job.horovod_network, horovod_rendezvous->port(),
                    job.settings.horovod);
  if (job.settings.horovod) {
    std::fprintf(stderr, "dtrain: Horovod Gloo rendezvous on %s:%d\n",
                 job.horovod_network.bind_address.c_str(), horovod_rendezvous->port());
  }
  record.rank_status.clear();
  JobAttempt started;
  started.restart_count = attempt;
  started.started_us = WallMicros();
  for (const NodeSpec& node : spec.nodes) started.nodes.push_back(node.host);
  record.attempts.push_back(started);
  if (attempt == 0) {
    WriteFirstJobRecord(job.folder.job_dir, record);
    record.writer = job.files;  // from now on, a drive that hangs holds the record, not the job
  } else {
    WriteJobRecord(job.folder.job_dir, record);
  }
  if (attempt > 0) {
    const std::string what =
        !job.returning.empty() ? fmt::format("restart to take node {} back", job.returning)
        : !job.left_slow.empty()
            ? fmt::format("restart without node {}", job.left_slow)
            : fmt::format("restart {} of {}", attempt - job.returns, job.settings.max_restarts);
    for (const auto& [rank, log] : job.logs) job.writer->MarkRestart(rank, what, WallMicros());
  }
  // Where this attempt's output starts: what the logs hold, or, with a write stuck on a drive that
  // hangs, what the files hold so far.
  const bool drained = job.writer->Drain(RankLogWriter::kLastWaitS);
  for (const auto& [rank, log] : job.logs) {
    if (drained) {
      log_start[rank] = log->size();
      continue;
    }
    std::error_code error;
    const uintmax_t size = std::filesystem::file_size(log->path(), error);
    log_start[rank] = error ? 0 : size;
  }
  try {
    std::unique_ptr<Transport> transport =
        MakeTransport(spec, job.options.grace_period_s, job.settings.node_timeout_s);
    std::unique_ptr<StallWatch> stall_watch;
    if (job.settings.stall_timeout_s > 0) {
      StallWatchOptions watch;
      watch.timeout_s = job.settings.stall_timeout_s;
      watch.on_stall = job.options.on_stall == "stop" ? OnStall::kStop : OnStall::kReport;
      watch.straggler_factor = job.settings.straggler_factor;
      watch.job_name = job.folder.name;
      watch.job_dir = job.folder.job_dir;
      watch.files = job.files;
      watch.on_report = [&](const JobEvent& event) {
        record.events.push_back(event);
        WriteJobRecord(job.folder.job_dir, record);
      };
      stall_watch = std::make_unique<StallWatch>(spec, record.plan, std::move(watch));
    }
    std::unique_ptr<HealthWatch> health_watch;
    if (job.settings.health_watch_s > 0) {
      // Checked just before: the start check (first attempt) or the restart check.
      const bool checked = attempt == 0 ? job.start_checked : job.options.restart_health_check;
      health_watch = std::make_unique<HealthWatch>(job.options.check_nodes, spec,
                                                   job.settings.health_watch_s, checked);
    }
    // Running short of nodes, the job takes back a quarantined node that is fit again.
    std::unique_ptr<HealthWatch> return_watch;
    const std::vector<int> may_return = job.pool.MayReturn();
    if (job.settings.health_watch_s > 0 && !may_return.empty() &&
        static_cast<int>(spec.nodes.size()) < job.pool.max_nodes()) {
      std::vector<int> in_job;  // tested with the returning (ReturnWatchNodes)
      for (const NodeSpec& node : spec.nodes) in_job.push_back(NodeIndex(job.spec, node.host));
      return_watch = std::make_unique<HealthWatch>(
          job.options.check_nodes, ReturnWatchNodes(job.spec, may_return, in_job),
          job.settings.health_watch_s, /*checked=*/true, WatchFor::kReturns);
    }
    StepWatch steps(job.folder.job_dir + "/metrics/rank-0.jsonl");
    SupervisorOptions supervise;
    supervise.health_watch = health_watch.get();
    supervise.return_watch = return_watch.get();
    supervise.on_health_warning = [&job](const NodeWarning& w) {
      RecordHealthWarning(job, w.host, w.what);
    };
    supervise.grace_period_s = job.options.grace_period_s;
    supervise.stall_watch = stall_watch.get();
    supervise.on_straggler = [&job](const Straggler& s) { return SayStraggler(job, s); };
    supervise.early_failure_s = job.settings.max_restarts > 0 ? kEarlyFailureS : 0;
    supervise.steps = &steps;
    supervise.log_sync = job.log_sync;
    supervise.files = job.files;
    supervise.store = store.get();
    ElasticLeaves leaves(job, spec, health_watch);
    if (elastic) {
      supervise.elastic = horovod_rendezvous.get();
      leaves.Absent();
      leaves.Wire(supervise, *elastic);
    }
    JobSupervisor supervisor(*transport, *job.writer, job.console, supervise);
    JobOutcome outcome = supervisor.Run(ProcessesFor(
        record.plan,
        RankCommand(job.settings.command, spec, job.options.torchrun_agent.numa_binding)));
    // The failing rank's last lines are read from its log next.
    job.writer->Drain(RankLogWriter::kLastWaitS);
    if (elastic) {
      // A node lost while the job went on is asked for nothing at the end.
      for (const auto& [rank, status] : outcome.statuses) {
        if (status.lost) job.lost_nodes.insert(record.plan.ranks.at(rank).host);
      }
      if (!outcome.elastic_failure.empty()) {
        std::fprintf(stderr, "dtrain: the elastic Horovod job cannot go on: %s\n",
                     outcome.elastic_failure.c_str());
        record.events.push_back(
            {WallMicros(), "elastic_round", "cannot go on: " + outcome.elastic_failure, ""});
      }
    }
    if (health_watch) {
      for (const NodeWarning& w : health_watch->TakeWarnings()) {
        RecordHealthWarning(job, w.host, w.what);
      }
      record.events.push_back(
          {WallMicros(), "health_watch",
           fmt::format("health watch: {} round(s) every {:g} s on {} node(s), {}",
                       health_watch->rounds(), job.settings.health_watch_s, spec.nodes.size(),
                       outcome.unfit && !outcome.unfit->straggler
                           ? "node " + outcome.unfit->host + " unfit"
                           : std::string("all fit")),
           ""});
    }
    steps.Finish();
    record.attempts.back().first_step_us = steps.first_step_us();
    record.attempts.back().first_step = steps.first_step();
    record.attempts.back().last_step = steps.last_step();
    return outcome;
  } catch (const Error& e) {  // the job could not run at all: say so in its record too
    record.status = "failed";
    record.exit_code = e.exit_code();
    record.ended_us = record.attempts.back().ended_us = WallMicros();
    record.attempts.back().exit_code = e.exit_code();
    WriteJobRecord(job.folder.job_dir, record);
    throw;
  }  // the transport's end reaps whatever is left of this attempt
}

}  // namespace

JobOutcome RunAttempt(Job& job, int attempt, const ClusterSpec& spec,
                      std::map<int, uint64_t>& log_start) {
  JobOutcome outcome = RunAttemptOnce(job, attempt, spec, log_start);
  if (outcome.store_failure.empty() || outcome.store_listened ||
      JobSupervisor::InterruptSignal() != 0)
    return outcome;
  // The store ended before it listened, so no rank could have met another: the same attempt
  // starts again at once with rank 0 hosting the store, as when the store cannot start at all.
  const std::string program =
      JobStoreCommand(job.settings.command, spec, job.record.plan.master_addr,
                      job.record.plan.master_port)
          .front();
  StoreFailed(job, spec, program, outcome.store_failure + "; every rank stopped and starts again");
  job.record.events.push_back(
      {WallMicros(), "store",
       "the job's TCPStore failed before listening: " + outcome.store_failure, ""});
  job.record.attempts.pop_back();
  return RunAttemptOnce(job, attempt, spec, log_start);
}

}  // namespace dtrain
