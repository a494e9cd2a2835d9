// RunLaunch reads top to bottom: choose the cluster, settle the job's settings, make its folder,
// place the cluster on its nodes (a Slurm allocation), plan the ranks, then run attempts
// (job_attempt.h: transport -> supervisor -> verdict) until one succeeds, is interrupted, or
// restarts run out; job.json is rewritten at every step.
#include "launcher/launch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/attempt_steps.h"
#include "launcher/cluster_choice.h"
#include "launcher/cluster_spec.h"
#include "launcher/console_echo.h"
#include "launcher/error.h"
#include "launcher/filtered_output.h"
#include "launcher/handled_signals.h"
#include "launcher/hangs/stall_watch.h"
#include "launcher/horovod_elastic_settings.h"
#include "launcher/horovod_gloo.h"
#include "launcher/horovod_rendezvous.h"
#include "launcher/horovodrun_output_files.h"
#include "launcher/host_discovery.h"
#include "launcher/job_attempt.h"
#include "launcher/job_placement.h"
#include "launcher/job_record.h"
#include "launcher/job_results_fetch.h"
#include "launcher/job_store.h"
#include "launcher/job_supervisor.h"
#include "launcher/job_sync.h"
#include "launcher/local/rank_orphans.h"
#include "launcher/log_reader.h"
#include "launcher/log_sync.h"
#include "launcher/node_health_checks.h"
#include "launcher/node_history.h"
#include "launcher/node_pool.h"
#include "launcher/node_return_wait.h"
#include "launcher/python_script_command.h"
#include "launcher/rank_error_file.h"
#include "launcher/rank_log.h"
#include "launcher/rank_log_outage.h"
#include "launcher/rank_plan.h"
#include "launcher/restart_policy.h"
#include "launcher/slurm/slurm_allocation.h"
#include "launcher/ssh/launch_dir_sync.h"
#include "launcher/ssh/ssh_preflight.h"
#include "launcher/ssh/workdir_sync.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

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

JobSettings SettleJobSettings(const LaunchOptions& options, const ClusterSpec& spec) {
  if (options.grace_period_s < 0) throw UsageError("--grace-period: expected seconds >= 0");
  if (options.log_sync_s < 0) throw UsageError("--log-sync: expected seconds >= 0");
  JobSettings job;
  // -m names its module on the command line (an empty one is refused there).
  PythonScriptCommand ran =
      RunPythonScripts(!options.command.empty() || options.module ? options.command
                       : !spec.job.command.empty()                ? spec.job.command
                                                                  : DefaultJobCommand(),
                       spec.python, options.module, options.no_python);
  job.command = std::move(ran.command);
  job.command_note = std::move(ran.note);
  job.max_restarts = options.max_restarts.value_or(spec.job.max_restarts);
  job.virtual_local_rank = options.virtual_local_rank;
  job.signals_to_handle =
      options.signals_to_handle.empty() ? kDefaultHandledSignals : options.signals_to_handle;
  job.handled_signals = ParseHandledSignals(job.signals_to_handle);
  if (job.max_restarts < 0) throw UsageError("--max-restarts: expected a number >= 0");
  job.timeline = options.timeline || spec.job.timeline;
  if (auto named = spec.env.find("HOROVOD_TIMELINE"); job.timeline && named != spec.env.end()) {
    throw UsageError(fmt::format(
        "HOROVOD_TIMELINE={} (from --timeline-filename, a --config-file's timeline.filename, -x "
        "or the cluster file's env) names one file for Horovod's timeline, and --timeline (or "
        "job.timeline) puts every rank's in the job folder, where dtrain timeline merges them; "
        "give one of them",
        named->second));
  }
  job.stall_timeout_s = options.stall_timeout_s.value_or(spec.job.stall_timeout_s);
  if (job.stall_timeout_s < 0) throw UsageError("--stall-timeout: expected seconds >= 0");
  if (options.on_stall != "report" && options.on_stall != "stop")
    throw UsageError("--on-stall: expected report or stop, not '" + options.on_stall + "'");
  const double straggler_factor = options.straggler_factor.value_or(spec.job.straggler_factor);
  if (straggler_factor != 0 && straggler_factor <= 1)
    throw UsageError("--straggler-factor: expected 0 (off) or a factor above 1, such as 1.5");
  const std::string on_straggler = options.on_straggler.value_or(spec.job.on_straggler);
  if (on_straggler != "report" && on_straggler != "leave")
    throw UsageError("--on-straggler: expected report or leave, not '" + on_straggler + "'");
  job.straggler_factor = job.stall_timeout_s > 0 ? straggler_factor : 0;
  job.straggler_leaves = on_straggler == "leave";
  job.horovod = options.horovod || spec.job.horovod || CommandAsksForHorovod(job.command);
  job.node_timeout_s = options.node_timeout_s.value_or(spec.job.node_timeout_s);
  if (job.node_timeout_s != 0 && job.node_timeout_s < 2)
    throw UsageError("--node-timeout: expected 0 (off) or seconds >= 2");
  if (!options.nnodes.empty()) job.node_count = ParseNodeCount(options.nnodes);
  if (options.drain_unfit && spec.transport != TransportKind::kSlurm) {
    throw UsageError(
        "--drain drains Slurm nodes, and this cluster's nodes are not Slurm's: without a "
        "scheduler, the launch's quarantine and --hold-back keep a node out");
  }
  // auto: every kHealthWatchS on ssh and Slurm nodes; this machine alone is not watched.
  job.health_watch_s =
      options.health_watch_s.value_or(spec.transport == TransportKind::kLocal ? 0 : kHealthWatchS);
  if (!options.check_nodes) job.health_watch_s = 0;
  job.join_timeout_s = JoinTimeoutS(options.cluster.torchrun);
  job.last_call_s = LastCallTimeoutS(options.cluster.torchrun);
  job.role = options.role.empty() ? spec.job.role : options.role;
  SettleElasticSettings(options, spec, job);
  if (job.min_np > 0)
    job.last_call_s = 0;  // an elastic Horovod job takes a node in without a restart
  // torchrun's --standalone draws a rendezvous id of its own whatever --rdzv-id says.
  if (!options.cluster.torchrun.standalone) job.run_id = options.cluster.torchrun.id;
  return job;
}

// --log-dir, else the cluster file's log_dir, absolute.
std::string LogDir(const LaunchOptions& options, const ClusterSpec& spec) {
  return Absolute(options.log_dir.empty() ? spec.log_dir : options.log_dir, CurrentDir());
}

JobFolder MakeJobFolder(const LaunchOptions& options, const ClusterSpec& spec) {
  JobFolder folder;
  folder.launch_dir = CurrentDir();
  folder.log_dir = LogDir(options, spec);
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
  record.node_timeout_s = spec.transport == TransportKind::kLocal ? 0 : job.node_timeout_s;
  record.started_us = WallMicros();
  return record;
}

// Index of `host` among the cluster's nodes (it is one of them).
int HostIndex(const ClusterSpec& spec, const std::string& host) {
  const int index = NodeIndex(spec, host);
  if (index < 0) throw Error("node " + host + " is not in the cluster");
  return index;
}

// The health check before the start: asked for, or by default (auto) on ssh and Slurm nodes;
// this machine alone (transport local) has no other node to start on instead.
bool StartHealthCheck(const LaunchOptions& options, const ClusterSpec& spec) {
  if (!options.check_nodes || options.start_health_check == "off") return false;
  return options.start_health_check == "on" || spec.transport != TransportKind::kLocal;
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
  plan.role = job.role;
  plan.virtual_local_rank = job.virtual_local_rank;
  plan.signals_to_handle = job.signals_to_handle;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) plan.own_visible_devices = v;
  plan.run_id = job.run_id;
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
  // Last of all, whatever a process of the job handed to dtrain and nothing else ended.
  const KillAdoptedChildrenAtScopeEnd kill_adopted;
  // --host-discovery-script: the script says which of the cluster's nodes take part (-np is the
  // ranks to start with, not a cut of the nodes); with no cluster named, it names the hosts.
  std::unique_ptr<HostDiscovery> discovery;
  ClusterChoice choice = options.cluster;
  if (!options.host_discovery_script.empty()) {
    discovery =
        std::make_unique<HostDiscovery>(options.host_discovery_script, options.slots_per_host);
    choice.np = 0;
    if (choice.cluster_file.empty() && choice.hosts.empty() && choice.hostfile.empty() &&
        !std::filesystem::exists("cluster.yaml")) {
      choice.hosts = WaitForDiscoveredHostList(*discovery, ElasticTimeoutS(options));
      choice.hosts_discovered = true;
    }
  }
  const ChosenCluster chosen = ChooseCluster(choice, options.count_node_devices);
  const JobSettings settings = SettleJobSettings(options, chosen.spec);
  const std::vector<std::string> agent_notes = TorchrunAgentNotes(options.torchrun_agent);
  InterruptHandlers::HandleAlso(settings.handled_signals);
  ClusterSpec chosen_spec = chosen.spec;
  if (options.spares > 0) MarkSpares(chosen_spec.nodes, options.spares);
  const HoldBackPlan held_back =
      PlanHoldBack(chosen_spec, LogDir(options, chosen_spec),
                   options.hold_back_s.value_or(chosen_spec.job.hold_back_s), WallMicros());
  NodePool pool(chosen_spec.nodes, settings.node_count);
  // The nodes the discovery script does not list yet are neither asked nor checked now: they
  // join when it lists them (horovod_elastic_leaves.h), checked then.
  std::set<std::string> unlisted;
  if (discovery) {
    const std::set<std::string> listed = WaitForDiscoveredNodes(
        *discovery, chosen_spec, options.cluster.np > 0 ? options.cluster.np : settings.min_np,
        ElasticTimeoutS(options));
    for (const NodeSpec& node : chosen_spec.nodes) {
      if (!listed.count(node.host)) unlisted.insert(node.host);
    }
  }
  ClusterSpec listed_spec = chosen_spec;
  listed_spec.nodes.erase(std::remove_if(listed_spec.nodes.begin(), listed_spec.nodes.end(),
                                         [&](const NodeSpec& n) { return unlisted.count(n.host); }),
                          listed_spec.nodes.end());
  // Every ssh node reachable, its host key as recorded: or nothing starts anywhere, unless the
  // only failures are nodes that could not be reached and the job can go on without them.
  // Short of nodes, a job with some reached waits for the others (node_return_wait.h).
  const UnreachedNodes unreached = PreflightSshNodes(listed_spec, [&](const UnreachedNodes& hosts) {
    NodePool without = pool;
    for (const auto& [host, why] : hosts) without.Quarantine(HostIndex(chosen_spec, host), why);
    return !without.Pick().empty() ||
           (MayWaitForNodes(settings) && !discovery && hosts.size() < listed_spec.nodes.size());
  });
  // From the job folder on, Ctrl-C (any handled signal) never kills dtrain mid-step: each step
  // that may take long (checks, waits, attempts) stops on it, and the job ends as interrupted,
  // with nothing left on a node and job.json saying so.
  InterruptHandlers interrupts;
  const JobFolder folder = MakeJobFolder(options, chosen_spec);
  JobRecord record = NewJobRecord(chosen_spec, settings, folder, options.on_stall);
  for (const auto& [host, error] : unreached) {
    const std::string why = "could not be reached at the start: " + error;
    pool.Quarantine(HostIndex(chosen_spec, host), why, /*may_return=*/true);
    record.quarantined[host] = why;
  }
  SlurmAllocation allocation;  // a batch job holding the nodes lives as long as the launch
  ClusterSpec spec =
      PlaceCluster(chosen_spec, folder, allocation, record, held_back.SlurmNodeNames());
  // The health checks' probes measure and test where the ranks write: the job's folder.
  spec.log_dir = folder.job_dir;
  // The nodes that may be asked anything (clocks, interfaces, --sync): all but the unreached.
  ClusterSpec reached = spec;
  reached.nodes.erase(std::remove_if(reached.nodes.begin(), reached.nodes.end(),
                                     [&](const NodeSpec& n) {
                                       return unreached.count(n.host) > 0 ||
                                              unlisted.count(n.host) > 0;
                                     }),
                      reached.nodes.end());
  const PlanOptions plan_options = PlanOptionsFor(chosen, settings, folder);
  std::vector<int> nodes = pool.Pick();
  // Short of nodes at the start: the plan the job has once they return.
  const std::vector<int> planned =
      nodes.empty() ? NodePool(spec.nodes, settings.node_count).Pick() : nodes;
  record.plan = MakeRankPlan(AttemptSpec(spec, planned), plan_options);
  if (settings.min_np > record.plan.world_size) {
    throw UsageError(fmt::format("--min-np {}: the job has only {} rank(s)", settings.min_np,
                                 record.plan.world_size));
  }
  if (options.max_np > 0 && options.max_np < record.plan.world_size && !discovery) {
    throw UsageError(fmt::format(
        "--max-np {}: the job starts {} rank(s), and an elastic job never grows past its start; "
        "give fewer ranks (-np) or a larger --max-np",
        options.max_np, record.plan.world_size));
  }

  std::map<int, std::unique_ptr<RankLog>> logs;
  const std::unique_ptr<LogSync> log_sync =
      options.log_sync_s > 0 ? std::make_unique<LogSync>(options.log_sync_s) : nullptr;
  RankLogWriter writer(logs);
  JobFileWriter files;  // job.json once the ranks run (JobRecord::writer), stall reports, folders
  ConsoleChoice shown = options.console;
  if (options.quiet) {
    shown.streams = ConsoleStreams::kNone;
    shown.local_streams.clear();
  }
  ConsoleEcho console(stdout, stderr, shown);
  PrintBanner(record, chosen, folder.job_dir);
  for (const std::string& note : agent_notes)
    std::fprintf(stderr, "dtrain: note: %s\n", note.c_str());
  if (!settings.command_note.empty())
    std::fprintf(stderr, "dtrain: note: %s\n", settings.command_note.c_str());
  SayHeldBack(held_back, spec, allocation, record);
  std::string spares;
  for (const NodeSpec& node : spec.nodes) {
    if (node.spare) spares += (spares.empty() ? "" : ",") + node.host;
  }
  if (!spares.empty()) {
    std::fprintf(stderr, "dtrain: spare node(s), used once a node is quarantined: %s\n",
                 spares.c_str());
  }
  for (const auto& [host, error] : unreached) {
    SayQuarantined(host, record.name, record.quarantined[host], /*may_return=*/true);
  }
  // First: a node's commands run in its workdir, which the first sync may create.
  const std::unique_ptr<LaunchDirSync> dir_sync = SyncLaunchDir(options, reached, folder, record);
  // Every job gets Horovod's rendezvous; only a job that asked for Horovod has its nodes' network
  // interfaces looked up (a query per SSH node) and hears what could not be found.
  // Asked of the reached nodes only; the others' ranks look their interface up as they start.
  std::set<std::string> not_asked = unlisted;
  for (const auto& [host, error] : unreached) not_asked.insert(host);
  const HorovodGlooNetwork horovod_network =
      FindHorovodGlooNetwork(spec, settings.horovod, not_asked);
  if (settings.horovod) {
    for (const std::string& note : horovod_network.notes)
      std::fprintf(stderr, "dtrain: note: %s\n", note.c_str());
  }

  // The copies of the ranks' output beside the logs, written by the logs' writer.
  if (std::unique_ptr<FilteredOutput> filtered = FilteredOutputFor(
          folder.job_dir, settings.role, options.torchrun_agent.duplicate_stdout_filters,
          options.torchrun_agent.duplicate_stderr_filters)) {
    writer.AddCopy(std::move(filtered));
  }
  if (!options.output_filename.empty()) {
    try {
      writer.AddCopy(std::make_unique<HorovodrunOutputFiles>(
          Absolute(options.output_filename, folder.launch_dir), record.plan.world_size,
          options.console.timestamps));
    } catch (const Error&) {
      RecordFailureBeforeStart(folder.job_dir, record, kExitFailure);
      throw;
    }
  }
  Job job{options,         spec, settings, folder, plan_options,
          horovod_network, logs, console,  record, pool};
  job.discovery = discovery.get();
  job.unlisted = unlisted;
  job.dir_sync = dir_sync.get();
  job.log_sync = log_sync.get();
  job.writer = &writer;
  job.files = &files;
  if (!unlisted.empty()) {
    std::vector<std::string> names(unlisted.begin(), unlisted.end());
    std::fprintf(stderr,
                 "dtrain: --host-discovery-script does not list node(s) %s yet: each joins the "
                 "elastic Horovod job when it does\n",
                 fmt::format("{}", fmt::join(names, ",")).c_str());
  }
  StopIfInterruptedBeforeStart(folder.job_dir, record, "while it prepared the nodes");
  if (StartHealthCheck(options, spec)) {
    // The unlisted nodes are checked when they join.
    std::vector<int> listed_nodes;  // short of nodes, those reached are checked while it waits
    for (int i : planned) {
      if (!unlisted.count(spec.nodes[i].host) && pool.quarantined(i).empty())
        listed_nodes.push_back(i);
    }
    const bool short_before = nodes.empty();
    nodes = CheckNodesBeforeStart(job, listed_nodes);
    if (!nodes.empty()) {
      for (int i : pool.Pick()) {
        if (unlisted.count(spec.nodes[i].host)) nodes.push_back(i);
      }
      std::sort(nodes.begin(), nodes.end());
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    }
    if (nodes.empty()) nodes = WaitForNodesAtStart(job, !short_before, !unreached.empty());
  } else if (nodes.empty()) {
    nodes = WaitForNodesAtStart(job, /*after_check=*/false, !unreached.empty());
  }
  StopIfInterruptedBeforeStart(folder.job_dir, record, "during the health check");
  {
    // torchrun's last call: on fewer than --nnodes MAX, wait a while for a node that may return.
    double waited_s = 0;
    const size_t had = nodes.size();
    nodes = WaitLastCall(job, nodes, "starts", waited_s);
    StopIfInterruptedBeforeStart(folder.job_dir, record, "while it waited for nodes");
    if (nodes.size() > had) job.waited_at_start = true;  // those that came back are synced
  }
  job.unlisted.clear();                 // a restart's check is of every node it picks
  NodeClockProbe clock_probe(reached);  // PyTorch traces carry their node's clock; taken below
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0) nodes = pool.Pick();
    // A node that came back while the start waited is synced as a restart's nodes are.
    if ((attempt > 0 || job.waited_at_start) && job.dir_sync) nodes = SyncPicked(job, nodes);
    std::map<int, uint64_t> log_start;
    const JobOutcome outcome = RunAttempt(job, attempt, AttemptSpec(spec, nodes), log_start);
    // Every later step, the checks before a restart among them, overlaps a step that lost a node
    // (SlurmPlacement::overlap_steps); `job` sees `spec` itself.
    for (const auto& [rank, status] : outcome.statuses) {
      if (status.lost && spec.transport == TransportKind::kSlurm)
        spec.slurm_placement.overlap_steps = true;
    }
    if (attempt == 0) {
      std::vector<std::string> notes;
      record.node_clocks = clock_probe.Take(notes);
      for (const std::string& n : notes) std::fprintf(stderr, "dtrain: warning: %s\n", n.c_str());
    }
    if (!EndAttempt(job, outcome, attempt, log_start)) break;
  }
  if (spec.transport == TransportKind::kSsh) {
    FetchNodeResults(folder.job_dir, reached, job.lost_nodes);
    PlaceFetchedSteps(record, folder.job_dir, job.lost_nodes);
  }
  PrintAttempts(record);
  files.Finish();  // the record's end written before the last sync, which takes it too
  record.writer = nullptr;
  EndTheLogs(files.Refused(JobRecordPath(folder.job_dir)), logs, writer, log_sync.get(),
             folder.job_dir);
  return record.exit_code;
}

}  // namespace dtrain
