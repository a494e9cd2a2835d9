// One attempt of a job, from its rank plan to the verdict on how it ended: RunAttempt plans the
// ranks for the nodes the pool picked, starts the job's TCPStore and Horovod's rendezvous, and
// supervises the ranks; EndAttempt records the attempt (cause, node blamed, root cause), says
// why it failed, quarantines nodes (lost, unfit in the health check, failing too often, or with a
// flaky link during a failed attempt where the job can go on without them) and
// decides whether the job runs again, after the backoff (job_attempt_end.cpp). launch.cpp loops
// over them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/console_echo.h"
#include "launcher/horovod_gloo.h"
#include "launcher/host_discovery.h"
#include "launcher/job_record.h"
#include "launcher/job_supervisor.h"
#include "launcher/launch.h"
#include "launcher/node_pool.h"
#include "launcher/rank_log.h"
#include "launcher/rank_log_writer.h"
#include "launcher/rank_plan.h"
#include "launcher/restart_policy.h"
#include "launcher/ssh/launch_dir_sync.h"

namespace dtrain {

// What the command line and the cluster file settle for this job.
struct JobSettings {
  std::vector<std::string> command;
  std::string command_note;  // how a script or module runs (python_script_command.h), or ""
  int max_restarts = 0;
  bool timeline = false;
  double stall_timeout_s = 0;
  double straggler_factor = 0;    // 0: no straggler watch (it needs the stall watch's probes)
  bool straggler_leaves = false;  // --on-straggler leave
  bool horovod = false;
  double node_timeout_s = 0;         // 0: ssh nodes not watched
  double health_watch_s = 0;         // seconds between health checks while the job runs; 0: none
  NodeCount node_count;              // --nnodes
  std::string role;                  // ROLE_NAME: --role, else job.role ("" = torchrun's "default")
  bool virtual_local_rank = false;   // torchrun's --virtual-local-rank
  std::string signals_to_handle;     // TORCHELASTIC_SIGNALS_TO_HANDLE (handled_signals.h)
  std::vector<int> handled_signals;  // the same, as signal numbers
  std::string run_id;                // TORCHELASTIC_RUN_ID: --rdzv-id ("" = the job's name)
  int min_np = 0;        // > 0: an elastic Horovod job going on with at least this many ranks
  int reset_limit = -1;  // its most new rounds; -1: any
  // --blacklist-cooldown-range MIN MAX: a node that left waits out a cooldown (horovodrun's,
  // elastic_cooldown.h) and may then join the job again; 0: a node that left stays out.
  double cooldown_min_s = 0, cooldown_max_s = 0;
  int max_np = 0;  // > 0: the most ranks an elastic job's round may have (--max-np)
  // > 0: how long the ranks wait for nodes to join when fewer than --min-np remain
  // (--elastic-timeout; a job a node can join: discovery script or cooldown); 0: it fails at once.
  int nodes_wait_s = 0;
  // How long a job short of nodes at its start or between attempts waits for quarantined ones
  // to return (node_return_wait.h), and the option that sets it, as said: torchrun's
  // join_timeout, or --elastic-timeout for an elastic Horovod job (horovodrun's driver waits that
  // long for --min-np slots).
  double join_timeout_s = 600;
  std::string join_timeout_named = "torchrun's join_timeout, --rdzv-conf join_timeout=S";
  std::string join_timeout_option = "--rdzv-conf join_timeout=S";
  // torchrun's last_call_timeout (--rdzv-conf last_call_timeout=S): how long an attempt about to
  // run on fewer than --nnodes MAX nodes waits for quarantined ones to return; 0: it does not.
  double last_call_s = 0;
};

// Where the job runs from and keeps its files: <log_dir>/<name>, `latest` pointing at it.
struct JobFolder {
  std::string launch_dir;
  std::string log_dir;
  std::string name;
  std::string job_dir;
};

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
  std::set<std::string> lost_nodes{};  // not asked for anything at the end
  bool store_failed = false;           // the job's TCPStore could not start: not tried again
  bool start_checked = false;          // the first attempt's nodes went through the health check
  bool waited_at_start = false;        // short of nodes at the start, it waited for them
  // The health checks' warnings (a link whose errors grow, a write that hung) since the last
  // attempt was judged: host -> each one, once ("" for one held against no node). A failed
  // attempt quarantines these nodes where the job can go on without them.
  std::multimap<std::string, std::string> health_warnings{};
  // Restarts not counted against --max-restarts (to take a quarantined node back, or without a
  // straggler's node), and the node the next attempt takes back ("" when it is another restart).
  int returns = 0;
  std::string returning{};
  // The node that left as a straggler before the next attempt (also not counted), or "".
  std::string left_slow{};
  // An elastic job's --host-discovery-script, running every second (null: none), and the nodes
  // it did not list at the start, which the start's health check leaves to their joining.
  HostDiscovery* discovery = nullptr;
  std::set<std::string> unlisted{};
  LaunchDirSync* dir_sync = nullptr;  // --sync on ssh nodes (null: none)
  LogSync* log_sync = nullptr;        // the rank logs' syncs (--log-sync; null: off)
  RankLogWriter* writer = nullptr;    // writes `logs` (set before the first attempt)
  JobFileWriter* files = nullptr;     // writes job.json once the first attempt starts, the
                                      // stall reports and a restart's error folder
};

// The cluster as one attempt sees it: only the nodes the pool picked, in the file's order.
ClusterSpec AttemptSpec(const ClusterSpec& spec, const std::vector<int>& picked);

// One attempt: a fresh rank plan, Horovod store, transport and stall watch; the supervisor's
// outcome. `log_start`: where this attempt's output starts in each log. Throws when the job
// could not run at all (its record says so first).
JobOutcome RunAttempt(Job& job, int attempt, const ClusterSpec& spec,
                      std::map<int, uint64_t>& log_start);

// Records how the attempt ended and says why it failed; true when the job is to run again.
bool EndAttempt(Job& job, const JobOutcome& outcome, int attempt,
                const std::map<int, uint64_t>& log_start);

}  // namespace dtrain
