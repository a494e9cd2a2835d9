// RunLaunch reads top to bottom: choose the cluster, settle the job's settings, make its folder,
// place the cluster on its nodes (a Slurm allocation), plan the ranks, then run attempts
// (transport -> supervisor) until one succeeds, is interrupted, or restarts run out; job.json
// is rewritten at every step.
#include "launcher/launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "launcher/cluster_choice.h"
#include "launcher/cluster_spec.h"
#include "launcher/console_echo.h"
#include "launcher/error.h"
#include "launcher/exit_abort_note.h"
#include "launcher/hangs/stall_watch.h"
#include "launcher/horovod_gloo.h"
#include "launcher/horovod_rendezvous.h"
#include "launcher/job_record.h"
#include "launcher/job_store.h"
#include "launcher/job_supervisor.h"
#include "launcher/log_reader.h"
#include "launcher/node_pool.h"
#include "launcher/rank_error_file.h"
#include "launcher/rank_log.h"
#include "launcher/rank_plan.h"
#include "launcher/restart_policy.h"
#include "launcher/slurm/slurm_allocation.h"
#include "launcher/ssh/ssh_preflight.h"
#include "launcher/ssh/workdir_sync.h"
#include "launcher/timeline/trace_fetch.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

constexpr int kFailureTailLines = 20;

std::string CurrentDir() {
  char buf[PATH_MAX];
  if (!::getcwd(buf, sizeof(buf))) throw Error(std::string("getcwd: ") + std::strerror(errno));
  return buf;
}

std::string Absolute(const std::string& path, const std::string& base) {
  if (!path.empty() && path[0] == '/') return path;
  if (path.rfind("./", 0) == 0) return base + "/" + path.substr(2);
  return base + "/" + path;
}

void MakeDirs(const std::string& path) {
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      throw Error(prefix + ": cannot create the directory: " + std::strerror(errno));
    }
    if (slash == std::string::npos) return;
  }
}

std::vector<ProcessSpec> ProcessesFor(const RankPlan& plan, const std::vector<std::string>& argv) {
  std::vector<ProcessSpec> procs;
  for (const RankSlot& slot : plan.ranks) {
    ProcessSpec spec;
    spec.id = slot.rank;
    spec.node_index = slot.node_rank;
    spec.argv = argv;
    spec.env = slot.env;
    spec.python_path_head = slot.python_path_head;
    procs.push_back(std::move(spec));
  }
  return procs;
}

// "rank 3 on node gpu-b failed: exit 7", then the root cause when a rank's @record error file
// gives one (rank, node, time, exception, innermost file:line), then the last lines of its log,
// then a note when those show torch's abort at interpreter exit (exit_abort_note.h).
// `from`: where this attempt's output starts in the log.
void ReportFailure(const RankPlan& plan, const JobOutcome& outcome, const std::string& job_dir,
                   uint64_t from, const std::optional<RankError>& cause) {
  const RankSlot& slot = plan.ranks.at(outcome.failed_rank);
  const ExitStatus& status = outcome.statuses.at(outcome.failed_rank);
  const std::string log = RankLogPath(job_dir, slot.rank);
  std::string text = fmt::format("dtrain: rank {} on node {} failed: {}\n", slot.rank, slot.host,
                                 status.Describe());
  if (cause) text += DescribeRankError(*cause, plan.ranks.at(cause->rank).host);
  std::vector<std::string> tail = LastLines(log, kFailureTailLines, from);
  if (tail.empty()) {
    text += fmt::format("dtrain: it wrote nothing to {}\n", log);
  } else {
    text += fmt::format("dtrain: last {} lines of {}:\n", tail.size(), log);
    for (const std::string& line : tail)
      text += fmt::format("  [{}:{}] {}\n", slot.host, slot.rank, line);
  }
  text += ExitAbortNote(status, tail);
  std::fputs(text.c_str(), stderr);
}

// The last line of a job stopped for a stall names the rank the others waited for.
void ReportStallStop(const RankPlan& plan, const JobOutcome& outcome, const std::string& job) {
  const StallReport& stall = *outcome.stall;
  std::string who = "no rank could be singled out";
  if (outcome.failed_rank >= 0) {
    const RankSlot& slot = plan.ranks.at(outcome.failed_rank);
    who = fmt::format("rank {} on node {} stalled", slot.rank, slot.host);
  }
  std::fprintf(stderr, "dtrain: %s\ndtrain: job %s stopped (--on-stall stop): %s\n",
               stall.summary.c_str(), job.c_str(), who.c_str());
}

// Metrics and PyTorch traces ranks wrote on nodes without shared storage come back into the job
// folder; files already here and complete (shared storage) are left as they are.
// Nodes in `lost` are not asked: nothing at the end of a job waits on a node that stopped
// answering (`dtrain logs`/`dtrain timeline` fetch its files later, once it is back).
void FetchNodeResults(const std::string& job_dir, const ClusterSpec& spec,
                      const std::set<std::string>& lost) {
  auto warn = [](const TraceFetchReport& report) {
    for (const std::string& w : report.warnings)
      std::fprintf(stderr, "dtrain: warning: %s\n", w.c_str());
  };
  try {
    JobSummary job = ReadJobSummary(job_dir);
    for (auto it = job.rank_hosts.begin(); it != job.rank_hosts.end();) {
      if (!lost.count(it->second)) {
        ++it;
        continue;
      }
      job.rank_metrics.erase(it->first);
      job.rank_traces.erase(it->first);
      it = job.rank_hosts.erase(it);
    }
    for (const std::string& host : lost) {
      std::fprintf(stderr,
                   "dtrain: node %s was lost: its metrics and traces were not fetched (later: "
                   "dtrain timeline --job %s, once it answers)\n",
                   host.c_str(), job.name.c_str());
    }
    const TraceFetchReport fetched = FetchRemoteMetrics(job_dir, job, spec.source, &spec.ssh);
    if (!fetched.fetched.empty()) {
      std::fprintf(stderr,
                   "dtrain: metrics of %zu rank(s) fetched from their nodes into %s/metrics\n",
                   fetched.fetched.size(), job_dir.c_str());
    }
    warn(fetched);
    std::set<std::string> skip = fetched.unreachable;
    skip.insert(lost.begin(), lost.end());
    const TraceFetchReport traces =
        FetchRemoteProfilerTraces(job_dir, job, spec.source, &spec.ssh, skip);
    if (!traces.fetched.empty()) {
      std::fprintf(stderr, "dtrain: %zu PyTorch profiler trace(s) fetched from the nodes\n",
                   traces.fetched.size());
    }
    warn(traces);
  } catch (const Error& e) {
    std::fprintf(stderr, "dtrain: warning: metrics or traces not fetched: %s\n", e.what());
  }
}

// What the command line and the cluster file settle for this job.
struct JobSettings {
  std::vector<std::string> command;
  int max_restarts = 0;
  bool timeline = false;
  double stall_timeout_s = 0;
  bool horovod = false;
  double node_timeout_s = 0;  // 0: ssh nodes not watched
  NodeCount node_count;       // --nnodes
};

JobSettings SettleJobSettings(const LaunchOptions& options, const ClusterSpec& spec) {
  if (options.grace_period_s < 0) throw UsageError("--grace-period: expected seconds >= 0");
  JobSettings job;
  job.command = !options.command.empty()    ? options.command
                : !spec.job.command.empty() ? spec.job.command
                                            : DefaultJobCommand();
  job.max_restarts = options.max_restarts.value_or(spec.job.max_restarts);
  if (job.max_restarts < 0) throw UsageError("--max-restarts: expected a number >= 0");
  job.timeline = options.timeline || spec.job.timeline;
  job.stall_timeout_s = options.stall_timeout_s.value_or(spec.job.stall_timeout_s);
  if (job.stall_timeout_s < 0) throw UsageError("--stall-timeout: expected seconds >= 0");
  if (options.on_stall != "report" && options.on_stall != "stop")
    throw UsageError("--on-stall: expected report or stop, not '" + options.on_stall + "'");
  job.horovod = options.horovod || spec.job.horovod || CommandAsksForHorovod(job.command);
  job.node_timeout_s = options.node_timeout_s.value_or(spec.job.node_timeout_s);
  if (job.node_timeout_s != 0 && job.node_timeout_s < 2)
    throw UsageError("--node-timeout: expected 0 (off) or seconds >= 2");
  if (!options.nnodes.empty()) job.node_count = ParseNodeCount(options.nnodes);
  return job;
}

// Where the job runs from and keeps its files: <log_dir>/<name>, `latest` pointing at it.
struct JobFolder {
  std::string launch_dir;
  std::string log_dir;
  std::string name;
  std::string job_dir;
};

JobFolder MakeJobFolder(const LaunchOptions& options, const ClusterSpec& spec) {
  JobFolder folder;
  folder.launch_dir = CurrentDir();
  folder.log_dir =
      Absolute(options.log_dir.empty() ? spec.log_dir : options.log_dir, folder.launch_dir);
  folder.name = options.job_name.empty() ? NewJobName() : options.job_name;
  CheckJobName(folder.name);
  if (folder.name == "latest") throw UsageError("job name 'latest' is the link to the newest job");
  MakeDirs(folder.log_dir);
  folder.job_dir = folder.log_dir + "/" + folder.name;
  for (int tries = 1; ::mkdir(folder.job_dir.c_str(), 0755) != 0; ++tries) {
    if (errno != EEXIST) {
      throw Error(folder.job_dir + ": cannot create the job folder: " + std::strerror(errno));
    }
    if (!options.job_name.empty() || tries == 10) {
      throw UsageError(folder.job_dir + ": the job exists already; choose another --job");
    }
    folder.name = NewJobName();  // two launches in the same second drew the same suffix
    folder.job_dir = folder.log_dir + "/" + folder.name;
  }
  MakeDirs(folder.job_dir + "/timeline");  // DTRAIN_TRACE_DIR of local ranks; dtrain-clip's traces
  PointLatestAt(folder.log_dir, folder.name);
  return folder;
}

JobRecord NewJobRecord(const ClusterSpec& spec, const JobSettings& job, const JobFolder& folder,
                       const std::string& on_stall) {
  JobRecord record;
  record.name = folder.name;
  record.cluster_source = spec.source;
  record.cluster_name = spec.name;
  record.transport = TransportName(spec.transport);
  record.command = job.command;
  record.launch_dir = folder.launch_dir;
  record.log_dir = folder.log_dir;
  record.nodes = spec.nodes;
  record.max_restarts = job.max_restarts;
  record.timeline = job.timeline;
  record.stall_timeout_s = job.stall_timeout_s;
  record.on_stall = on_stall;
  record.node_timeout_s = spec.transport == TransportKind::kSsh ? job.node_timeout_s : 0;
  record.started_us = WallMicros();
  return record;
}

// A job that ends before any attempt (its nodes never came, --sync failed, Ctrl-C while it
// waited for nodes: 128+signal) says so in job.json.
void RecordFailureBeforeStart(const std::string& job_dir, JobRecord& record, int exit_code) {
  record.status = exit_code > 128 ? "interrupted" : "failed";
  record.exit_code = exit_code;
  record.ended_us = WallMicros();
  WriteJobRecord(job_dir, record);
}

// The cluster on the nodes it runs on: a Slurm cluster on its allocation, the rest as they are.
ClusterSpec PlaceCluster(const ClusterSpec& spec, const JobFolder& folder,
                         SlurmAllocation& allocation, JobRecord& record) {
  try {
    const ClusterSpec placed =
        PlaceOnSlurm(spec, {"dtrain-" + folder.name, folder.job_dir}, allocation);
    record.nodes = placed.nodes;
    record.slurm = placed.slurm_placement;
    // Inside the caller's allocation srun finds the job in SLURM_JOB_ID; the record names it
    // for `dtrain status`, which runs elsewhere.
    const char* caller_job = std::getenv("SLURM_JOB_ID");
    if (record.slurm.placed && record.slurm.job_id.empty() && caller_job) {
      record.slurm.job_id = caller_job;
    }
    return placed;
  } catch (const Error& e) {
    RecordFailureBeforeStart(folder.job_dir, record, e.exit_code());
    throw;
  }
}

PlanOptions PlanOptionsFor(const ChosenCluster& chosen, const JobSettings& job,
                           const JobFolder& folder) {
  PlanOptions plan;
  plan.master_addr = chosen.master_addr;
  plan.job_name = folder.name;
  plan.job_dir = folder.job_dir;
  plan.launch_dir = folder.launch_dir;
  plan.omp_num_threads_set = std::getenv("OMP_NUM_THREADS") != nullptr;
  plan.timeline = job.timeline;
  plan.stall_timeout_s = job.stall_timeout_s;
  plan.max_restarts = job.max_restarts;
  plan.role = chosen.spec.job.role;
  if (const char* v = std::getenv("TORCH_NCCL_ASYNC_ERROR_HANDLING")) {
    plan.nccl_async_error_handling = v;
  }
  return plan;
}

void PrintBanner(const JobRecord& record, const ChosenCluster& chosen, const std::string& job_dir) {
  std::fprintf(stderr, "dtrain: job %s: %d rank(s) on %d node(s) (%s), logs in %s\n",
               record.name.c_str(), record.plan.world_size, record.plan.node_count,
               record.transport.c_str(), job_dir.c_str());
  std::fprintf(stderr, "dtrain: %s; ranks: %s; rendezvous %s:%d (%s)%s%s\n", chosen.source.c_str(),
               chosen.ranks_why.c_str(), record.plan.master_addr.c_str(), record.plan.master_port,
               chosen.port_why.c_str(), chosen.env_file.empty() ? "" : "; env file ",
               chosen.env_file.c_str());
  for (const std::string& note : chosen.notes)
    std::fprintf(stderr, "dtrain: note: %s\n", note.c_str());
}

// --sync: the launch directory to every ssh node before any rank starts.
void SyncLaunchDir(const ClusterSpec& spec, const JobFolder& folder, JobRecord& record) {
  if (spec.transport != TransportKind::kSsh) {
    std::fprintf(stderr,
                 "dtrain: --sync: a %s cluster shares this machine's files: nothing to copy\n",
                 TransportName(spec.transport));
    return;
  }
  SyncOptions sync;
  sync.source = folder.launch_dir;
  sync.exclude = folder.log_dir;
  sync.progress = ::isatty(STDERR_FILENO);
  const SyncReport synced = SyncWorkdir(spec, sync);
  std::fputs(DescribeSync(synced).c_str(), stderr);
  if (!synced.ok()) {
    RecordFailureBeforeStart(folder.job_dir, record, kExitFailure);
    throw Error("--sync: the workdir could not be copied to every node; no rank was started");
  }
}

// Everything an attempt needs that stays the same across attempts.
struct Job {
  const LaunchOptions& options;
  const ClusterSpec& spec;
  const JobSettings& settings;
  const JobFolder& folder;
  PlanOptions plan_options;
  const HorovodGlooNetwork& horovod_network;
  std::map<int, std::unique_ptr<RankLog>>& logs;
  ConsoleEcho& console;
  JobRecord& record;
  NodePool& pool;
  std::set<std::string> lost_nodes;  // not asked for anything at the end
  bool store_failed = false;  // the job's TCPStore could not start: not tried again
};

// The cluster as one attempt sees it: only the nodes the pool picked, in the file's order.
ClusterSpec AttemptSpec(const ClusterSpec& spec, const std::vector<int>& picked) {
  ClusterSpec attempt = spec;
  attempt.nodes.clear();
  for (int i : picked) attempt.nodes.push_back(spec.nodes[i]);
  return attempt;
}

// Logs for every rank of the plan (a restart on bigger nodes has more), and the console's hosts.
void PrepareLogs(Job& job) {
  std::map<int, std::string> hosts;
  for (const RankSlot& slot : job.record.plan.ranks) {
    if (!job.logs.count(slot.rank))
      job.logs[slot.rank] = std::make_unique<RankLog>(job.folder.job_dir, slot.rank);
    hosts[slot.rank] = slot.host;
  }
  job.console.SetHosts(std::move(hosts));
}

// The job's TCPStore when the job is a Python program (JobPython) or dtrain-clip, started with
// its Python or dtrain-clip on node 0 at the rendezvous (JobStoreCommand); null (rank 0 hosts
// the store, as before) when it is neither, on Slurm, when the user set
// TORCHELASTIC_USE_AGENT_STORE to anything but True, or when the store could not start there
// (said once).
std::unique_ptr<JobStore> StartJobStore(Job& job, const ClusterSpec& spec, const RankPlan& plan,
                                        int attempt) {
  const std::vector<std::string> command =
      JobStoreCommand(job.settings.command, spec, plan.master_addr, plan.master_port);
  if (command.empty() || spec.transport == TransportKind::kSlurm || job.store_failed)
    return nullptr;
  const std::string& python = command.front();  // the job's Python, or dtrain-clip
  // -x TORCHELASTIC_USE_AGENT_STORE=False (or the cluster file's env) keeps rank 0 the host.
  auto asked = spec.env.find("TORCHELASTIC_USE_AGENT_STORE");
  if (asked != spec.env.end() && asked->second != "True") return nullptr;
  auto store = std::make_unique<JobStore>(spec, command);
  if (store->ready()) {
    if (attempt == 0) {
      std::fprintf(stderr, "dtrain: the job's TCPStore on %s:%d (%s on node %s)\n",
                   plan.master_addr.c_str(), plan.master_port, python.c_str(),
                   spec.nodes.front().host.c_str());
    }
    return store;
  }
  std::fprintf(stderr,
               "dtrain: note: the job's TCPStore did not start with %s on node %s: %s; "
               "rank 0 hosts it\n",
               python.c_str(), spec.nodes.front().host.c_str(), store->why().c_str());
  job.store_failed = true;
  return nullptr;
}

// One attempt: a fresh rank plan, Horovod store, transport and stall watch; the supervisor's
// outcome. `log_start`: where this attempt's output starts in each log. Throws when the job
// could not run at all (its record says so first).
JobOutcome RunAttempt(Job& job, int attempt, const ClusterSpec& spec,
                      std::map<int, uint64_t>& log_start) {
  JobRecord& record = job.record;
  job.plan_options.restart_count = attempt;
  record.plan = MakeRankPlan(spec, job.plan_options);
  MakeDirs(fmt::format("{}/errors/attempt-{}", job.folder.job_dir, attempt));
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
  auto horovod_rendezvous = std::make_unique<HorovodRendezvous>(job.horovod_network.bind_address,
                                                                HorovodScopeSizes(record.plan));
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
  WriteJobRecord(job.folder.job_dir, record);
  if (attempt > 0) {
    for (const auto& [rank, log] : job.logs)
      log->MarkRestart(attempt, job.settings.max_restarts, WallMicros());
  }
  for (const auto& [rank, log] : job.logs) log_start[rank] = log->size();
  try {
    std::unique_ptr<Transport> transport =
        MakeTransport(spec, job.options.grace_period_s, job.settings.node_timeout_s);
    std::unique_ptr<StallWatch> stall_watch;
    if (job.settings.stall_timeout_s > 0) {
      StallWatchOptions watch;
      watch.timeout_s = job.settings.stall_timeout_s;
      watch.on_stall = job.options.on_stall == "stop" ? OnStall::kStop : OnStall::kReport;
      watch.job_name = job.folder.name;
      watch.job_dir = job.folder.job_dir;
      watch.on_report = [&](const JobEvent& event) {
        record.events.push_back(event);
        WriteJobRecord(job.folder.job_dir, record);
      };
      stall_watch = std::make_unique<StallWatch>(spec, record.plan, std::move(watch));
    }
    FirstStepWatch first_step(job.folder.job_dir + "/metrics/rank-0.jsonl");
    SupervisorOptions supervise;
    supervise.grace_period_s = job.options.grace_period_s;
    supervise.stall_watch = stall_watch.get();
    supervise.early_failure_s = job.settings.max_restarts > 0 ? kEarlyFailureS : 0;
    supervise.first_step = &first_step;
    JobSupervisor supervisor(*transport, job.logs, job.console, supervise);
    JobOutcome outcome = supervisor.Run(ProcessesFor(record.plan, job.settings.command));
    record.attempts.back().first_step_us = first_step.first_step_us();
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

// "dtrain: node node1 lost: no answer for 10 s, last seen 12:01:07; its rank(s) 1 ended with it".
void ReportNodeLost(const RankPlan& plan, const AttemptVerdict& verdict) {
  std::string ranks;
  for (const RankSlot& slot : plan.ranks) {
    if (slot.host == verdict.blamed_host)
      ranks += (ranks.empty() ? "" : ",") + std::to_string(slot.rank);
  }
  std::fprintf(stderr, "dtrain: %s; its rank(s) %s went with it; every other rank stopped\n",
               verdict.detail.c_str(), ranks.c_str());
}

// Waits out the backoff before a restart; false when an interrupt came meanwhile.
bool WaitBeforeRestart(double seconds) {
  InterruptHandlers handlers;
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (JobSupervisor::InterruptSignal() != 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return JobSupervisor::InterruptSignal() == 0;
}

// Index in the cluster's nodes of the node named `host`, -1 if none.
int NodeIndex(const ClusterSpec& spec, const std::string& host) {
  for (size_t i = 0; i < spec.nodes.size(); ++i) {
    if (spec.nodes[i].host == host) return static_cast<int>(i);
  }
  return -1;
}

// The root cause of a failed attempt from the ranks' @record error files (rank_error_file.h);
// those SSH nodes wrote on their own disks are fetched into the job folder first.
std::optional<RankError> FindRootCause(Job& job, int attempt, int failed_rank) {
  const std::string& job_dir = job.folder.job_dir;
  std::vector<std::pair<int, std::string>> files;
  bool missing = false;
  for (const RankSlot& slot : job.record.plan.ranks) {
    files.emplace_back(slot.rank, ErrorFilePath(job_dir, attempt, slot.rank));
    missing = missing || ::access(files.back().second.c_str(), F_OK) != 0;
  }
  if (missing && job.spec.transport == TransportKind::kSsh) {
    try {
      FetchRemoteErrorFiles(job_dir, ReadJobSummary(job_dir), job.spec.ssh, attempt);
    } catch (const Error& e) {
      std::fprintf(stderr, "dtrain: warning: error files not fetched: %s\n", e.what());
    }
  }
  return FirstRankError(files, failed_rank);
}

// Records how the attempt ended and says why it failed; true when the job is to run again.
bool EndAttempt(Job& job, const JobOutcome& outcome, int attempt,
                const std::map<int, uint64_t>& log_start) {
  JobRecord& record = job.record;
  JobAttempt& this_attempt = record.attempts.back();
  this_attempt.ended_us = WallMicros();
  this_attempt.exit_code = outcome.exit_code;
  this_attempt.failed_rank = outcome.failed_rank;
  const int interrupt = JobSupervisor::InterruptSignal();
  const AttemptVerdict verdict =
      JudgeAttempt(record.plan, outcome, this_attempt.started_us, interrupt);
  this_attempt.cause = verdict.cause;
  this_attempt.blamed_node = verdict.blamed_host;
  this_attempt.detail = verdict.detail;
  this_attempt.fault_us = outcome.failed_us;
  record.rank_status = outcome.statuses;
  record.exit_code = outcome.exit_code;
  record.failed_rank = outcome.failed_rank;
  if (verdict.node_lost) {
    job.lost_nodes.insert(verdict.blamed_host);
    ReportNodeLost(record.plan, verdict);
  } else if (outcome.stall) {
    ReportStallStop(record.plan, outcome, record.name);
  } else if (outcome.failed_rank >= 0) {
    const std::optional<RankError> cause = FindRootCause(job, attempt, outcome.failed_rank);
    if (cause) {
      record.events.push_back({WallMicros(), "root_cause",
                               RankErrorLine(*cause, record.plan.ranks.at(cause->rank).host),
                               cause->path});
    }
    ReportFailure(record.plan, outcome, job.folder.job_dir, log_start.at(outcome.failed_rank),
                  cause);
  }
  // This machine alone (transport local) is never excluded for failures: there is no other.
  if (interrupt == 0 && !verdict.blamed_host.empty() &&
      (verdict.node_lost || job.spec.transport != TransportKind::kLocal)) {
    const int index = NodeIndex(job.spec, verdict.blamed_host);
    const std::string why =
        index < 0 ? "" : job.pool.Blame(index, verdict.node_lost, verdict.detail);
    if (!why.empty()) {
      record.quarantined[verdict.blamed_host] = why;
      std::fprintf(stderr, "dtrain: node %s quarantined for the rest of job %s: %s\n",
                   verdict.blamed_host.c_str(), record.name.c_str(), why.c_str());
    }
  }

  std::vector<int> next_nodes;
  if (outcome.exit_code == 0 && interrupt == 0) {
    record.status = "succeeded";
  } else if (interrupt != 0) {
    record.status = "interrupted";
    if (outcome.failed_rank < 0) record.exit_code = 128 + interrupt;
    std::fprintf(stderr, "dtrain: job %s interrupted by %s; every rank stopped\n",
                 record.name.c_str(), SignalName(interrupt).c_str());
  } else if (verdict.deterministic && attempt < job.settings.max_restarts) {
    record.status = "failed";
    std::fprintf(stderr,
                 "dtrain: job %s not restarted: %s, which another attempt would only repeat\n",
                 record.name.c_str(), verdict.detail.c_str());
  } else if (attempt < job.settings.max_restarts && (next_nodes = job.pool.Pick()).empty()) {
    record.status = "failed";
    std::fprintf(stderr, "dtrain: job %s cannot restart: %s\n", record.name.c_str(),
                 job.pool.why_not().c_str());
  } else if (attempt < job.settings.max_restarts) {
    const double backoff = BackoffSeconds(attempt + 1);
    std::string nodes;
    for (int i : next_nodes) {
      nodes += (nodes.empty() ? "" : ",") + job.spec.nodes[i].host;
      if (job.spec.nodes[i].spare) nodes += " (spare)";
    }
    std::fprintf(stderr, "dtrain: restarting job %s (restart %d of %d) in %g s on %s; cause: %s\n",
                 record.name.c_str(), attempt + 1, job.settings.max_restarts, backoff,
                 nodes.c_str(), verdict.cause.c_str());
    WriteJobRecord(job.folder.job_dir, record);
    if (WaitBeforeRestart(backoff)) return true;
    record.status = "interrupted";
    record.exit_code = 128 + JobSupervisor::InterruptSignal();
  } else {
    record.status = "failed";
    if (job.settings.max_restarts > 0) {
      std::fprintf(stderr, "dtrain: job %s failed: all %d restart(s) used\n", record.name.c_str(),
                   job.settings.max_restarts);
    }
  }
  record.ended_us = WallMicros();
  WriteJobRecord(job.folder.job_dir, record);
  return false;
}

// The end of the console: one line per attempt, when there was more than one.
void PrintAttempts(const JobRecord& record) {
  if (record.attempts.size() < 2) return;
  std::fprintf(stderr, "dtrain: job %s attempts:\n", record.name.c_str());
  for (size_t i = 0; i < record.attempts.size(); ++i) {
    const JobAttempt* next = i + 1 < record.attempts.size() ? &record.attempts[i + 1] : nullptr;
    std::fprintf(stderr, "dtrain:   %s\n", DescribeAttempt(record.attempts[i], next).c_str());
  }
}

}  // namespace

std::vector<std::string> DefaultJobCommand() {
  return {"dtrain-clip", "train", "--dataset-type", "fashion-mnist"};
}

int RunLaunch(const LaunchOptions& options) {
  const ChosenCluster chosen = ChooseCluster(options.cluster);
  const JobSettings settings = SettleJobSettings(options, chosen.spec);
  ClusterSpec chosen_spec = chosen.spec;
  if (options.spares > 0) MarkSpares(chosen_spec.nodes, options.spares);
  NodePool pool(chosen_spec.nodes, settings.node_count);
  // Every ssh node reachable, its host key as recorded: or nothing starts anywhere.
  PreflightSshNodes(chosen_spec);
  const JobFolder folder = MakeJobFolder(options, chosen_spec);
  JobRecord record = NewJobRecord(chosen_spec, settings, folder, options.on_stall);
  SlurmAllocation allocation;  // a batch job holding the nodes lives as long as the launch
  const ClusterSpec spec = PlaceCluster(chosen_spec, folder, allocation, record);
  const PlanOptions plan_options = PlanOptionsFor(chosen, settings, folder);
  std::vector<int> nodes = pool.Pick();
  record.plan = MakeRankPlan(AttemptSpec(spec, nodes), plan_options);

  std::map<int, std::unique_ptr<RankLog>> logs;
  ConsoleEcho console(stdout, stderr, {}, options.ranks_filter,
                      options.quiet ? ConsoleStreams::kNone : options.console);
  PrintBanner(record, chosen, folder.job_dir);
  std::string spares;
  for (const NodeSpec& node : spec.nodes) {
    if (node.spare) spares += (spares.empty() ? "" : ",") + node.host;
  }
  if (!spares.empty()) {
    std::fprintf(stderr, "dtrain: spare node(s), used once a node is quarantined: %s\n",
                 spares.c_str());
  }
  // Every job gets Horovod's rendezvous; only a job that asked for Horovod has its nodes' network
  // interfaces looked up (a query per SSH node) and hears what could not be found.
  const HorovodGlooNetwork horovod_network = FindHorovodGlooNetwork(spec, settings.horovod);
  if (settings.horovod) {
    for (const std::string& note : horovod_network.notes)
      std::fprintf(stderr, "dtrain: note: %s\n", note.c_str());
  }
  if (options.sync) SyncLaunchDir(spec, folder, record);

  Job job{options, spec,   settings, folder, plan_options, horovod_network, logs,
          console, record, pool,     {}};
  NodeClockProbe clock_probe(spec);  // PyTorch traces carry their node's clock; taken below
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) nodes = pool.Pick();
    std::map<int, uint64_t> log_start;
    const JobOutcome outcome = RunAttempt(job, attempt, AttemptSpec(spec, nodes), log_start);
    if (attempt == 0) {
      std::vector<std::string> notes;
      record.node_clocks = clock_probe.Take(notes);
      for (const std::string& n : notes) std::fprintf(stderr, "dtrain: warning: %s\n", n.c_str());
    }
    if (!EndAttempt(job, outcome, attempt, log_start)) break;
  }
  PrintAttempts(record);
  if (spec.transport == TransportKind::kSsh) FetchNodeResults(folder.job_dir, spec, job.lost_nodes);
  return record.exit_code;
}

}  // namespace dtrain
