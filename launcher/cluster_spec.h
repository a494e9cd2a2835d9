// ClusterSpec: the cluster file (DESIGN.md "The cluster file") as plain data. Parsing checks
// every key; errors name file:line:column and what was expected, and exit with status 2.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

enum class TransportKind { kSsh, kLocal, kSlurm };
enum class HostKeyPolicy { kStrict, kAcceptNew };

struct SshOptions {
  std::string user;  // empty: the current user
  int port = 22;
  std::string identity_file;  // empty: agent, then ~/.ssh/id_*
  std::string known_hosts;    // empty: ~/.ssh/known_hosts
  HostKeyPolicy host_key_policy = HostKeyPolicy::kStrict;
  int connect_timeout_s = 10;
  // ssh_config(5) file read for every node: "" = ~/.ssh/config, "none" = none. What the
  // cluster file sets explicitly wins over it; the *_given flags say what it set.
  std::string config;
  std::string proxy_jump;  // "[user@]host[:port],...": bastions in order; "" = from the config
  bool port_given = false;
  bool host_key_policy_given = false;
  bool connect_timeout_given = false;
};

struct NodeSpec {
  std::string host;     // name used in reports and logs
  std::string address;  // defaults to host (or its HostName in ~/.ssh/config, for ssh)
  int slots = 1;
  std::vector<int> gpus;  // empty: not listed (CUDA_VISIBLE_DEVICES untouched)
  std::map<std::string, std::string> env;
  bool address_given = false;  // the cluster file said `address:`
  bool spare = false;          // `spare: true`: used only once another node was quarantined
  // In the launch's health check only: a node not about to run (an idle spare) that takes part
  // in the peer test so that a pair of two nodes that cannot connect is blamed on one of them;
  // nothing is judged of the witness itself.
  bool witness = false;
  // The machine's own name where only placing the cluster tells it (a Slurm node name, see
  // launcher/slurm/slurm_allocation.h); "" = host. Ranks see it as HOROVOD_HOSTNAME.
  std::string machine = "";
  const std::string& MachineName() const { return machine.empty() ? host : machine; }
};

// The cluster file's env variable that sets how many nodes each node connects to in a round of
// the health watch's peer test (doctor/peer_plan.h): a whole number, kMinPeerPartners or more.
constexpr const char* kPeerPartnersVariable = "DTRAIN_PROBE_PEERS_PARTNERS";
constexpr size_t kMinPeerPartners = 2;
// Its value as a number; 0 when `text` is not a whole number of at least kMinPeerPartners.
size_t ParsePeerPartners(const std::string& text);

// How long an earlier job's quarantine holds a node back by default (--hold-back,
// job.hold_back): a day.
constexpr int kDefaultHoldBackS = 86400;

struct JobSpec {
  std::vector<std::string> command;  // empty: the embedded default (dtrain-clip on Fashion-MNIST)
  int max_restarts = 0;
  bool timeline = false;
  int stall_timeout_s = 300;  // a rank without progress this long is stalled; 0: no watch
  bool horovod = false;       // serve Horovod's Gloo rendezvous (README "Horovod")
  int node_timeout_s = 10;    // an ssh node silent this long is lost (and ends its ranks itself)
  int hold_back_s = kDefaultHoldBackS;  // an earlier job's quarantine holds a node back this long
  double straggler_factor = 1.5;        // the straggler watch's factor; 0: off
  std::string on_straggler = "report";  // report | leave
  std::string role;                     // ROLE_NAME of every rank; "" = torchrun's "default"
};

// One of the cluster file's `health_checks`: a site's own test of a node (a mount, a service, a
// licence, a firmware level), run by `dtrain doctor` and, unless only a warning, by the launch's
// health checks before the start, before a restart and during the run. Exit status 0 passes.
struct HealthCheckSpec {
  std::string name;  // in reports: "health check 'scratch'"
  std::string run;   // `sh -c` on the node, in the workdir, with the cluster's and node's env
  int timeout_s = 10;
  bool warning = false;  // `severity: warning`: the doctor warns; the launch leaves it out
  std::string fix;       // what to do when it fails ("" : run it on the node to see why)
};

// The longest a health check may take (`timeout:`): the probe waits for the slowest.
constexpr int kMaxHealthCheckSeconds = 300;

struct SlurmSpec {
  std::string partition;
  std::string time;
  std::string account;
  std::map<std::string, std::string> extra;  // further sbatch options, passed as --key=value
};

// Where a `transport: slurm` cluster's nodes are. Set by placing the spec on its allocation
// (launcher/slurm/slurm_allocation.h) before any rank plan is made; never read from the file.
struct SlurmPlacement {
  bool placed = false;
  std::string job_id;               // srun --jobid; "" = the caller's allocation (SLURM_JOB_ID)
  std::string job_name = "dtrain";  // srun --job-name of every step
  // A step lost a node: slurmctld keeps that step, and the CPUs it holds on every node, until it
  // declares the node DOWN (SlurmdTimeout, 300 s by default), so every later step overlaps it
  // (srun --overlap) instead of waiting.
  bool overlap_steps = false;
};

// More ranks than any cluster dtrain is for (a few hundred machines of 8 GPUs): a sanity limit,
// so a typo fails at once instead of after minutes of starting processes.
constexpr int kMaxRanks = 65536;

struct ClusterSpec {
  std::string source;  // the file it came from ("" when built in code)
  std::string name;
  // ssh by default; local when `transport:` is absent and every node is this machine.
  TransportKind transport = TransportKind::kSsh;
  bool transport_given = false;  // the file said `transport:`
  SshOptions ssh;
  std::vector<NodeSpec> nodes;
  int rendezvous_port = 29500;
  bool rendezvous_port_given = false;  // the file said `rendezvous.port:`
  std::string workdir;  // remote cwd and PYTHONPATH head; empty: the launch directory
  std::string python;   // what the doctor checks; empty: python3 on PATH
  std::map<std::string, std::string> env;
  std::string env_file;  // NAME=VALUE lines for every rank (relative paths: to the file's folder)
  std::map<std::string, std::string> expect;  // cuda, nccl, python, torch, horovod, driver pins
  std::string log_dir = "./dtrain-logs";
  std::vector<HealthCheckSpec> health_checks;
  JobSpec job;
  SlurmSpec slurm;
  SlurmPlacement slurm_placement;
};

// Throws UsageError("FILE:LINE:COL: ...") on any problem.
ClusterSpec ParseClusterFile(const std::string& path);
// `origin` names the text in errors (a path, or "<builtin>").
ClusterSpec ParseClusterText(const std::string& text, const std::string& origin);

// The spec used when there is neither -c nor ./cluster.yaml: one local node with
// NPROC_PER_NODE ranks (default: the devices in CUDA_VISIBLE_DEVICES, else 1).
ClusterSpec DefaultLocalCluster();

// The one place that picks the default cluster file: "cluster.yaml" when the current
// directory has one, else "".
std::string DefaultClusterFile();

// The cluster of `path` (-c), else of ./cluster.yaml when there is one, else
// DefaultLocalCluster(). Throws like ParseClusterFile.
ClusterSpec LoadClusterOrDefault(const std::string& path);

const char* TransportName(TransportKind kind);

}  // namespace dtrain
