// `dtrain launch`: flags -> LaunchOptions -> RunLaunch.
#include <atomic>
#include <cctype>
#include <memory>

#include "cli/commands.h"
#include "cli/number_checks.h"
#include "doctor/fast_health_check.h"
#include "doctor/node_device_count.h"
#include "doctor/slurm_drain.h"
#include "launcher/error.h"
#include "launcher/horovodrun_options.h"
#include "launcher/launch.h"
#include "launcher/torchrun_console.h"

namespace dtrain {

namespace {

// horovodrun's: --start-timeout, --gloo, and the options that set the ranks' environment
// (launcher/horovodrun_options.h), each recorded as given.
void AddHorovodrunOptions(CLI::App& cmd, LaunchOptions& options) {
  cmd.add_option("--start-timeout", options.cluster.start_timeout_s,
                 "horovodrun's: seconds each ssh node may take to answer at the start "
                 "(ssh.connect_timeout)")
      ->check(WholeNumberAtLeast(1));
  cmd.add_flag("--gloo",
               "horovodrun's: accepted; Horovod jobs always get Gloo's rendezvous from dtrain");
  cmd.add_flag("--verbose",
               "horovodrun's: accepted; dtrain prints its banner and notes anyway (-q quiets "
               "the ranks' output, not them)");
  cmd.add_flag("--disable-cache",
               "horovodrun's: accepted; dtrain keeps no cache of its checks between runs");
  cmd.add_flag("--prefix-output-with-timestamp", options.console.timestamps,
               "horovodrun's (also -prefix-timestamp): each console line starts with the local "
               "time, as horovodrun writes it (the logs stay as the rank wrote them)");
  cmd.add_option("--output-filename", options.output_filename,
                 "horovodrun's: every rank's stdout and stderr also in DIR/rank.R/stdout and "
                 "stderr, each line after [R]<stdout>: as horovodrun writes them (the rank logs "
                 "stay as they are)")
      ->type_name("DIR");
  cmd.add_option("--min-np,--min-num-proc", options.min_np,
                 "horovodrun's: elastic Horovod (HOROVOD_ELASTIC=1): when a rank fails, its node "
                 "leaves and the others go on (hvd.elastic.run) while at least this many ranks "
                 "remain")
      ->check(WholeNumberAtLeast(1));
  cmd.add_option("--max-np,--max-num-proc", options.max_np,
                 "horovodrun's: with --min-np; the most ranks the job has (without "
                 "--host-discovery-script at least the job's ranks: it never grows past them)")
      ->check(WholeNumberAtLeast(1));
  cmd.add_option("--reset-limit", options.reset_limit,
                 "horovodrun's: with --min-np; the most times the job may go on with fewer ranks")
      ->check(WholeNumberAtLeast(0));
  cmd.add_option("--blacklist-cooldown-range", options.blacklist_cooldown_range,
                 "horovodrun's: MIN MAX seconds; with --min-np, a node that left the job joins it "
                 "again after a cooldown (MIN*2^n+u*MIN, at most MAX, the n-th time it left) and "
                 "the health checks; unset: it stays out")
      ->expected(2)
      ->type_name("S");
  cmd.add_option("--host-discovery-script", options.host_discovery_script,
                 "horovodrun's: elastic Horovod; a program run here every second that prints "
                 "the hosts available now (HOST or HOST:SLOTS a line): the cluster's nodes it "
                 "lists take part, one it stops listing leaves at the next reset, one it lists "
                 "joins; with no cluster named, its hosts are the nodes")
      ->type_name("SCRIPT");
  cmd.add_option("--slots-per-host", options.slots_per_host,
                 "horovodrun's: with --host-discovery-script, the slots of a host it lists "
                 "without :SLOTS (when its hosts are the nodes)")
      ->check(WholeNumberAtLeast(1));
  cmd.add_option("--elastic-timeout", options.elastic_timeout_s,
                 "horovodrun's: how long an elastic job waits for nodes: at the start, for "
                 "--host-discovery-script to list -np (else --min-np) ranks, or for a node that "
                 "could not be reached; with fewer than --min-np ranks left, for a node to join "
                 "(listed, or back from --blacklist-cooldown-range); default "
                 "HOROVOD_ELASTIC_TIMEOUT, else 600 s")
      ->check(WholeNumberAtLeast(1));
  std::map<std::string, std::string>& given = options.cluster.horovodrun;
  std::vector<std::string> names = {"--start-timeout",
                                    "--gloo",
                                    "--verbose",
                                    "--disable-cache",
                                    "--prefix-output-with-timestamp",
                                    "--output-filename",
                                    "--min-np",
                                    "--max-np",
                                    "--reset-limit",
                                    "--blacklist-cooldown-range",
                                    "--host-discovery-script",
                                    "--slots-per-host",
                                    "--elastic-timeout"};
  for (const HorovodrunOption& o : HorovodrunOptions()) {
    const std::string name = o.name;
    names.push_back(name);
    const std::string help = "horovodrun's: " + HorovodrunHelp(o);
    if (o.value == HorovodrunValue::kFlag) {
      cmd.add_flag_callback(
          name, [&given, name] { given[name] = ""; }, help);
      continue;
    }
    CLI::Option* opt = cmd.add_option_function<std::string>(
        name,
        [&given, name, kind = o.value](const std::string& value) {
          std::string& all = given[name];
          if (kind == HorovodrunValue::kNumber)
            all = PythonFloatText(value);
          else
            all += (all.empty() ? "" : ",") + value;  // --network-interface, repeated
        },
        help);
    if (o.value == HorovodrunValue::kWhole) opt->check(WholeNumberAtLeast(0));
    if (o.value == HorovodrunValue::kNumber) opt->check(CLI::NonNegativeNumber);
    if (o.value == HorovodrunValue::kLogLevel) opt->check(CLI::IsMember(kHorovodLogLevels));
    if (o.value != HorovodrunValue::kList)
      opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    opt->allow_extra_args(false);
  }
  for (const std::string& name : names)
    cmd.get_option(name)->group("horovodrun's options (man dtrain-launch, HOROVOD)");
}

}  // namespace

void AddLaunchCommand(CLI::App& app, CommandRun& run) {
  auto options = std::make_shared<LaunchOptions>();
  auto max_restarts = std::make_shared<int>(0);
  auto ranks = std::make_shared<std::vector<int>>();
  auto console = std::make_shared<std::string>("both");
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start a job on every node with the rank environment; stop all of it if any part fails");
  cmd->footer(
      "The first word that is not an option of dtrain starts the rank command, as with torchrun, "
      "mpirun and srun: `dtrain launch -np 2 python3 train.py --lr 0.1`. A first word ending "
      "in .py runs with the job's Python (the cluster file's python:, else python3), as "
      "torchrun and deepspeed run it: `dtrain launch -np 2 train.py --lr 0.1`.\n"
      "Nodes: -c FILE, else -H or --hostfile, else ./cluster.yaml, else this machine with "
      "NPROC_PER_NODE ranks (default: the devices in CUDA_VISIBLE_DEVICES, else 1).\n"
      "A rank that makes no progress (dtrain-clip's heartbeat, else output or CPU time) for "
      "--stall-timeout seconds is reported: every rank's node, pid, state, stack or collective, "
      "in <log_dir>/<job>/stall-N.txt too.\n"
      "Exit status: 0, the first failing rank's status (128+signal for a signal, 127 when the "
      "command is not found), 124 when stopped for a stall, 2 for a usage or cluster-file error. "
      "More: man dtrain-launch");
  cmd->add_option("-c,--cluster", options->cluster.cluster_file,
                  "cluster file (default: ./cluster.yaml, else one local node)");
  cmd->add_option("-H,--hosts", options->cluster.hosts,
                  "nodes as HOST[:SLOTS],... (horovodrun/mpirun -H)");
  cmd->add_option("--hostfile", options->cluster.hostfile,
                  "nodes from a file of 'HOST slots=N' lines (MPI/DeepSpeed hostfile)");
  cmd->add_option("--np,--num-proc", options->cluster.np,
                  "-np N: N ranks in all, filling the nodes' slots in order")
      ->check(WholeNumberAtLeast(1));
  auto nproc = std::make_shared<std::string>();
  cmd->add_option("--nproc-per-node", *nproc,
                  "ranks per node (overrides slots and NPROC_PER_NODE): N, or torchrun's gpu "
                  "(a node's GPUs: its gpus: list, else counted there), cpu (a node's CPUs) or "
                  "auto (gpu where there are GPUs, else cpu)")
      ->type_name("N|gpu|cpu|auto")
      ->check(CountOrOneOf(1, {"gpu", "cpu", "auto"}));
  cmd->add_option("--master-port", options->cluster.master_port,
                  "rendezvous port, MASTER_PORT (default: rendezvous.port; local jobs: "
                  "MASTER_PORT if set, else a free port)")
      ->check(PortNumber());
  cmd->add_option("-p,--ssh-port", options->cluster.ssh_port,
                  "every node's ssh port (horovodrun's -p; default: the cluster file's ssh.port, "
                  "else ~/.ssh/config, else 22)")
      ->check(PortNumber());
  cmd->add_option("-i,--ssh-identity-file", options->cluster.ssh_identity_file,
                  "the ssh key (horovodrun's -i; default: the cluster file's "
                  "ssh.identity_file, else ~/.ssh/config, ssh-agent, ~/.ssh/id_*)");
  cmd->add_option("-x", options->cluster.pass_env,
                  "NAME or NAME=VALUE: pass a variable to every rank (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--job", options->job_name, "job name (default: YYYYmmdd-HHMMSS-xxxx)");
  cmd->add_option("--log-dir", options->log_dir,
                  "where job folders go (default: the cluster file's log_dir)");
  CLI::Option* restarts = cmd->add_option("--max-restarts", *max_restarts,
                                          "restart the whole job up to K times in all after "
                                          "failures (1, 2, 4 ... 30 s apart; an error every rank "
                                          "hits at start is not retried)")
                              ->check(WholeNumberAtLeast(0));
  cmd->add_flag("--sync", options->sync,
                "first copy this directory to every node's workdir that does not share it "
                "(as dtrain sync)");
  cmd->add_flag("--timeline", options->timeline, "write a per-rank timeline into the job folder");
  cmd->add_flag(
      "--horovod", options->horovod,
      "also look up each node's interface for Horovod's Gloo and NCCL (HOROVOD_GLOO_IFACE, "
      "NCCL_SOCKET_IFNAME; also job.horovod, or a --horovod argument); the rendezvous "
      "is served to every job; not elastic");
  CLI::Option* console_option =
      cmd->add_option("--console", *console,
                      "rank streams shown on the console: both, stdout, stderr or none (or 3, 1, "
                      "2, 0); the logs always get both")
          ->check(CLI::IsMember({"both", "stdout", "stderr", "none", "0", "1", "2", "3"}));
  auto redirects = std::make_shared<std::string>();
  auto tee = std::make_shared<std::string>();
  CLI::Option* redirects_option = cmd->add_option(
      "-r,--redirects", *redirects,
      "torchrun's: streams kept off the console, 0-3 or LOCAL_RANK:N,... (the logs get them)");
  CLI::Option* tee_option = cmd->add_option(
      "-t,--tee", *tee,
      "torchrun's: streams shown on the console although redirected, 0-3 or LOCAL_RANK:N,...");
  cmd->add_option("--ranks-filter", *ranks, "show only these ranks on the console (R,R,...)")
      ->delimiter(',')
      ->check(WholeNumberAtLeast(0))
      ->allow_extra_args(false);
  auto local_ranks = std::make_shared<std::vector<int>>();
  cmd->add_option("--local-ranks-filter", *local_ranks,
                  "torchrun's: show only these local ranks of every node on the console (R,R,...)")
      ->delimiter(',')
      ->check(WholeNumberAtLeast(0))
      ->allow_extra_args(false);
  cmd->add_flag("--quiet,-q", options->quiet,
                "show no rank output on the console (logs still get it)");
  cmd->add_option("--grace-period", options->grace_period_s,
                  "seconds between SIGTERM and SIGKILL when stopping ranks (and two of the "
                  "straggler's steps when a straggler's node leaves)")
      ->capture_default_str()
      ->check(SecondsAtLeast(0));
  cmd->add_option("--log-sync", options->log_sync_s,
                  "seconds between syncs of the rank logs to their disk, which find a drive that "
                  "failed under them while their writes still succeed, or that hangs; 0: off")
      ->capture_default_str()
      ->check(SecondsAtLeast(0));
  auto stall_timeout = std::make_shared<double>(300);
  CLI::Option* stall = cmd->add_option("--stall-timeout", *stall_timeout,
                                       "seconds without progress after which a rank is stalled "
                                       "and the stall report is made; 0: off (default: "
                                       "job.stall_timeout, else 300)")
                           ->check(SecondsAtLeast(0));
  cmd->add_option("--on-stall", options->on_stall,
                  "what a stall does: report (keep running) or stop (tear down, exit 124)")
      ->capture_default_str()
      ->check(CLI::IsMember({"report", "stop"}));
  cmd->add_option("--straggler-factor", options->straggler_factor,
                  "name a dtrain-clip rank busy this many times the other ranks' per step (they "
                  "wait for it); 0: off; read with the stall watch's probes (default: "
                  "job.straggler_factor, else 1.5)")
      ->check(FactorAboveOneOrZero());
  cmd->add_option("--on-straggler", options->on_straggler,
                  "what a straggler does: report (warn) or leave (its node leaves and the job "
                  "restarts without it, when it can go on without it) (default: job.on_straggler, "
                  "else report)")
      ->check(CLI::IsMember({"report", "leave"}));
  auto node_timeout = std::make_shared<double>(10);
  CLI::Option* node_timeout_option =
      cmd->add_option("--node-timeout", *node_timeout,
                      "seconds an ssh or Slurm node may answer nothing before it is lost (its "
                      "ranks stopped everywhere, and ended by the node itself or by Slurm); 0: "
                      "off (default: job.node_timeout, else 10)")
          ->check(SecondsAtLeast(0));
  cmd->add_option("--spares", options->spares,
                  "the last N listed nodes wait as spares, used once a node is quarantined "
                  "(also `spare: true` on a node)")
      ->check(WholeNumberAtLeast(0));
  auto hold_back = std::make_shared<double>(kDefaultHoldBackS);
  CLI::Option* hold_back_option =
      cmd->add_option("--hold-back", *hold_back,
                      "seconds a node that a job of the log dir quarantined (lost, unfit, a "
                      "straggler) is held back as a spare while a spare no such job quarantined "
                      "can take its place (on Slurm: left out of the batch job); 0: pick as the "
                      "cluster file says (default: job.hold_back, else 86400)")
          ->check(SecondsAtLeast(0));
  auto drain = std::make_shared<bool>(false);
  cmd->add_flag("--drain", *drain,
                "Slurm: drain the Slurm node of each node quarantined for failing the health "
                "checks (scontrol update State=DRAIN); needs Slurm's operator role");
  cmd->add_option("--nnodes", options->nnodes,
                  "N or MIN:MAX nodes (torchrun's): a restart goes on with fewer nodes while at "
                  "least MIN are healthy");
  auto health_check = std::make_shared<std::string>("on");
  cmd->add_option("--restart-health-check", *health_check,
                  "before a restart, run the doctor's fast health checks (GPUs, NVLink, Xid "
                  "errors, InfiniBand, free space) on the failed attempt's nodes and quarantine "
                  "the unfit: on or off")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--start-health-check", options->start_health_check,
                  "before the first attempt, run the same checks on its nodes: an unfit node "
                  "is quarantined and a spare takes its place (or --nnodes MIN:MAX goes on with "
                  "fewer), else nothing starts; auto: on for ssh and Slurm nodes, off for this "
                  "machine alone")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off", "auto"}));
  auto health_watch_s = std::make_shared<double>(0);
  CLI::Option* health_watch =
      cmd->add_option("--health-watch", *health_watch_s,
                      "seconds between the same checks on the running job's nodes: a node that "
                      "turns unfit (GPU fallen off the bus, Xid error, wedged nvidia-smi) stops "
                      "the attempt and is quarantined; 0: off (default: 30 on ssh and Slurm "
                      "nodes, off for this machine alone)")
          ->check(SecondsAtLeast(0));
  cmd->add_flag("-m,--module", options->module,
                "run the command's first word as a Python module, as torchrun -m does: "
                "dtrain launch -m pkg.train ARGS runs python3 -m pkg.train ARGS");
  cmd->add_flag("--no-python", options->no_python,
                "run a first word ending in .py as a program (by default it runs with the job's "
                "Python, as torchrun runs a script)");
  AddHorovodrunOptions(*cmd, *options);
  TorchrunRendezvous& rdzv = options->cluster.torchrun;
  cmd->add_flag("--standalone", rdzv.standalone,
                "torchrun's: this machine alone (./cluster.yaml is not read), a free port, and "
                "--rdzv-* not used");
  cmd->add_option("--rdzv-endpoint", rdzv.endpoint,
                  "torchrun's HOST[:PORT]: PORT is the rendezvous port (as --master-port); the "
                  "job's store is on the first node, which HOST should be");
  cmd->add_option("--rdzv-backend", rdzv.backend,
                  "torchrun's: c10d and static run as they do; with etcd or etcd-v2 no etcd "
                  "server is contacted (dtrain hosts the rendezvous)")
      ->check(CLI::IsMember({"c10d", "static", "etcd", "etcd-v2"}));
  cmd->add_option("--rdzv-id", rdzv.id,
                  "torchrun's: the run id every rank sees (TORCHELASTIC_RUN_ID; default: the "
                  "job's name)");
  cmd->add_option("--rdzv-conf", rdzv.conf,
                  "torchrun's KEY=VALUE,...: join_timeout=S is how long a job short of nodes "
                  "waits for a quarantined one to return (default 600); last_call_timeout=S how "
                  "long one about to run on fewer than --nnodes MAX waits for them (default 0: "
                  "it starts at once); the other keys are not used (dtrain starts every rank "
                  "itself), a note says so");
  cmd->add_option("--role", options->role,
                  "torchrun's: the ranks' ROLE_NAME (default: job.role, else default)")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("expected a name") : std::string(); },
          "NAME"));
  cmd->add_flag("--virtual-local-rank", options->virtual_local_rank,
                "torchrun's: every rank sees LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES of its one "
                "GPU (its local rank's entry in the node's gpus:, else CUDA_VISIBLE_DEVICES)");
  cmd->add_option("--signals-to-handle", options->signals_to_handle,
                  "torchrun's SIG,...: signals that stop the job (SIGINT, SIGTERM, SIGHUP and "
                  "SIGQUIT always); the ranks get SIGTERM for those four and the signal itself "
                  "for others, such as SIGUSR1 from sbatch --signal (default: "
                  "SIGTERM,SIGINT,SIGHUP,SIGQUIT)");
  TorchrunAgentOptions& agent = options->torchrun_agent;
  cmd->add_option("--start-method", agent.start_method,
                  "torchrun's: accepted; a script runs as a process of its own either way, as "
                  "under torchrun")
      ->check(CLI::IsMember({"spawn", "fork", "forkserver"}));
  cmd->add_flag("--run-path", agent.run_path,
                "torchrun's: accepted; the script runs in a fresh Python either way");
  cmd->add_option("--local-addr", agent.local_addr,
                  "torchrun's: not used (a note says so): each node's address is the cluster "
                  "file's");
  cmd->add_option("--event-log-handler", agent.event_log_handler,
                  "torchrun's: not used (a note says so): the job's events go to job.json");
  cmd->add_option("--logs-specs", agent.logs_specs,
                  "torchrun's plugin for its log files: refused, with why");
  cmd->add_option(
         "--numa-binding", agent.numa_binding,
         "torchrun's node|socket|exclusive|core-complex: bind each rank to the CPUs of its "
         "GPU's NUMA node (its socket's nodes; its share of the node's cores; one L3 "
         "cache group) with taskset")
      ->check(ValuesOffered({"node", "socket", "exclusive", "core-complex"}));
  cmd->add_option("--duplicate-stdout-filters", agent.duplicate_stdout_filters,
                  "torchrun's S,...: copy every rank's stdout lines holding any S to "
                  "<job>/filtered_stdout.log");
  cmd->add_option("--duplicate-stderr-filters", agent.duplicate_stderr_filters,
                  "torchrun's S,...: the same for stderr, to <job>/filtered_stderr.log");
  cmd->add_option_function<double>(
         "--monitor-interval", [](double) {},  // checked, not used
         "torchrun's: not needed, and not used: dtrain hears of a rank's end as it "
         "happens, not by polling")
      ->check(SecondsAtLeast(0));
  for (const char* name : {"-r",
                           "-t",
                           "--local-ranks-filter",
                           "--standalone",
                           "--rdzv-endpoint",
                           "--rdzv-backend",
                           "--rdzv-id",
                           "--rdzv-conf",
                           "--role",
                           "--monitor-interval",
                           "--virtual-local-rank",
                           "--signals-to-handle",
                           "--start-method",
                           "--run-path",
                           "--local-addr",
                           "--event-log-handler",
                           "--logs-specs",
                           "--numa-binding",
                           "--duplicate-stdout-filters",
                           "--duplicate-stderr-filters"})
    cmd->get_option(name)->group("torchrun's options (man dtrain-launch)");
  cmd->add_option("command", options->command, "the command each rank runs, with its arguments");
  cmd->callback([options, nproc, max_restarts, ranks, local_ranks, restarts, console,
                 console_option, redirects, redirects_option, tee, tee_option, stall, stall_timeout,
                 node_timeout, node_timeout_option, health_check, health_watch, health_watch_s,
                 hold_back, hold_back_option, drain, &run] {
    if (!nproc->empty()) {
      if (std::isdigit(static_cast<unsigned char>(nproc->front()))) {
        options->cluster.nproc_per_node = std::stoi(*nproc);
      } else {
        options->cluster.nproc_kind = *nproc;
        options->count_node_devices = AskNodeDevices;
      }
    }
    options->restart_health_check = *health_check == "on";
    if (health_watch->count() > 0) options->health_watch_s = *health_watch_s;
    if (options->restart_health_check || options->start_health_check != "off" ||
        options->health_watch_s.value_or(1) > 0) {
      // One reading of each node's link error counters to the next, for the whole launch.
      auto links = std::make_shared<LinkErrorWatch>();
      // The health watch's rounds (the running attempt's nodes, those not reached left out) test
      // a few pairs each, others each round; the checks before a start test every pair.
      auto watch_rounds = std::make_shared<std::atomic<uint64_t>>(0);
      options->check_nodes = [links, watch_rounds](const ClusterSpec& nodes, bool count_unreached,
                                                   const std::function<bool()>& cancelled) {
        const PeerPlan plan =
            count_unreached ? PeerPlan{} : WatchPeerPlan(nodes, watch_rounds->fetch_add(1));
        return FastHealthCheck(nodes, kFastHealthCheckTimeoutS, count_unreached, cancelled,
                               links.get(), plan);
      };
    }
    if (restarts->count() > 0) options->max_restarts = *max_restarts;
    if (node_timeout_option->count() > 0) options->node_timeout_s = *node_timeout;
    if (hold_back_option->count() > 0) options->hold_back_s = *hold_back;
    if (*drain) {
      options->drain_unfit = [](const NodeSpec& node, const std::string& why) {
        return DrainSlurmNodes({DrainOf(node, why, "dtrain launch")}).front();
      };
    }
    if (stall->count() > 0) options->stall_timeout_s = *stall_timeout;
    ConsoleChoice& shown = options->console;
    shown.ranks.insert(ranks->begin(), ranks->end());
    shown.local_ranks.insert(local_ranks->begin(), local_ranks->end());
    if (redirects_option->count() > 0 || tee_option->count() > 0) {
      if (console_option->count() > 0) {
        throw UsageError(
            "--console and torchrun's --redirects/--tee both choose the console's streams; "
            "give one of them");
      }
      const ConsoleStreamsByLocalRank torchrun = TorchrunConsole(*redirects, *tee);
      shown.streams = torchrun.others;
      shown.local_streams = torchrun.by_local_rank;
    } else {
      const std::string& c = *console;
      shown.streams = c == "none" || c == "0"     ? ConsoleStreams::kNone
                      : c == "stdout" || c == "1" ? ConsoleStreams::kStdout
                      : c == "stderr" || c == "2" ? ConsoleStreams::kStderr
                                                  : ConsoleStreams::kBoth;
    }
    run = [options] { return RunLaunch(*options); };
  });
}

}  // namespace dtrain
