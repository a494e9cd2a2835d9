// `dtrain launch` top to bottom: cluster file -> rank plan -> transport -> supervised job ->
// logs and job.json, restarting the whole job up to max_restarts times after a failure, on the
// nodes the node pool still trusts (node_pool.h) and after the restart policy's backoff
// (restart_policy.h).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "launcher/cluster_choice.h"
#include "launcher/console_echo.h"
#include "launcher/health_watch.h"
#include "launcher/node_history.h"
#include "launcher/torchrun_agent_options.h"

namespace dtrain {

struct LaunchOptions {
  ClusterChoice cluster;  // -c, -H, --hostfile, -np, --nproc-per-node, -x, --master-port, --rdzv-*
  std::string job_name;   // "" = NewJobName()
  std::string log_dir;    // "" = the cluster file's log_dir
  std::optional<int> max_restarts;  // unset: the cluster file's job.max_restarts
  bool timeline = false;            // or job.timeline in the cluster file
  bool sync = false;                // --sync: the launch directory to every node first
  bool horovod = false;             // or job.horovod, or a `--horovod` argument of the command
  ConsoleChoice console;            // what the console shows of the ranks (never the logs)
  std::string output_filename;      // horovodrun's --output-filename DIR ("" = none)
  bool quiet = false;               // console only: no rank output at all
  std::string role;                 // torchrun's --role: ROLE_NAME ("" = job.role, else default)
  bool virtual_local_rank = false;  // torchrun's --virtual-local-rank (rank_plan.h)
  std::string signals_to_handle;    // torchrun's --signals-to-handle ("" = its default list)
  TorchrunAgentOptions torchrun_agent;  // torchrun's agent options (torchrun_agent_options.h)
  double grace_period_s = 10;
  double log_sync_s = 1;  // --log-sync S: the rank logs synced to their disk this often; 0: off
  std::optional<double> stall_timeout_s;  // unset: job.stall_timeout (default 300); 0: off
  std::string on_stall = "report";        // report | stop
  // The straggler watch (hangs/straggler_watch.h): a rank busy this many times the others' per
  // step is named (0: off); --on-straggler leave: its node leaves when the job can go on.
  std::optional<double> straggler_factor;   // unset: job.straggler_factor (default 1.5); 0: off
  std::optional<std::string> on_straggler;  // report | leave; unset: job.on_straggler (report)
  std::optional<double> node_timeout_s;     // unset: job.node_timeout (default 10)
  int spares = 0;                           // --spares N: the last N listed nodes wait as spares
  // --hold-back S: earlier jobs' quarantines count this long; unset: job.hold_back (a day).
  std::optional<double> hold_back_s;
  std::string nnodes;                // --nnodes N or MIN:MAX; "" = every non-spare node
  std::vector<std::string> command;  // empty: job.command, else the embedded default
  bool module = false;               // -m: the command is a Python module (python3 -m)
  bool no_python = false;            // --no-python: a first word *.py runs as a program
  // The health check: host -> why, for the nodes unfit to run an attempt, which are quarantined.
  // Run on a failed attempt's nodes (those not lost) before a restart, on the first attempt's
  // nodes before the start when start_health_check says so, and every health_watch_s seconds
  // while an attempt runs (health_watch.h). The CLI sets the doctor's fast health checks
  // (doctor/fast_health_check.h) unless all three are off; unset: none.
  NodeHealthCheck check_nodes;
  // Asks ssh nodes for their GPUs and CPUs, for --nproc-per-node gpu|cpu|auto (the CLI sets the
  // doctor's probe, doctor/node_device_count.h); unset: such nodes need a gpus: list.
  NodeDeviceCounter count_node_devices;
  // --drain (Slurm): called with each node quarantined for failing the health checks (before a
  // start or restart, or the health watch) and why; drains the Slurm node it ran on and returns
  // what to say (doctor/slurm_drain.h). Unset: nothing is drained.
  std::function<std::string(const NodeSpec& node, const std::string& why)> drain_unfit;
  bool restart_health_check = true;         // --restart-health-check on|off
  std::optional<double> health_watch_s;     // --health-watch S; unset: kHealthWatchS on ssh
                                            // and Slurm nodes, none on this machine alone
  std::string start_health_check = "auto";  // --start-health-check on|off|auto (auto: ssh, slurm)
  // horovodrun's elastic mode: --min-np > 0 makes a Horovod job elastic (HOROVOD_ELASTIC=1,
  // horovod_elastic_rounds.h); --max-np caps its rounds' ranks (without a discovery script it
  // must allow the job's ranks); --reset-limit caps its new rounds (-1: any);
  // --blacklist-cooldown-range MIN MAX lets a node that left join again after a cooldown (empty:
  // it stays out); --host-discovery-script (host_discovery.h) says which nodes take part, with
  // --slots-per-host for its lines without slots and --elastic-timeout (0: HOROVOD_ELASTIC_TIMEOUT,
  // else 600 s) for the start's wait.
  int min_np = 0;
  int max_np = 0;
  int reset_limit = -1;
  std::vector<int> blacklist_cooldown_range;
  std::string host_discovery_script;
  int slots_per_host = 0;
  int elastic_timeout_s = 0;
};

// The command run when neither the command line nor the cluster file names one.
std::vector<std::string> DefaultJobCommand();

// Runs the job; returns dtrain's exit status (0, or the first failing rank's status).
// Throws UsageError for cluster-file and option problems.
int RunLaunch(const LaunchOptions& options);

}  // namespace dtrain
