// Transport: runs processes on the cluster's nodes and reports what they print and how they end.
// One implementation per `transport:` value (local, ssh, slurm); the job supervisor and the
// doctor both drive it through this interface, so neither knows how bytes cross the network.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/exit_status.h"

namespace dtrain {

// A process's stdin produced piece by piece (a sync's archive), for data too large to hold.
class StdinSource {
 public:
  virtual ~StdinSource() = default;
  // Appends up to `max` next bytes to `out`; false once everything was given (EOF follows).
  virtual bool Next(std::string& out, size_t max) = 0;
};

// One process to run: a rank of a job, or one probe per node for the doctor.
struct ProcessSpec {
  int id = 0;                     // the rank (or node index for per-node work); echoed in events
  int node_index = 0;             // which ClusterSpec::nodes entry runs it
  std::vector<std::string> argv;  // argv[0] resolved as the user wrote it
  std::map<std::string, std::string> env;  // added to the node's environment, byte for byte
  std::string python_path_head;            // prepended to the node's PYTHONPATH; "" = leave it
  std::string cwd;                         // "" = the transport's default (workdir or launch dir)
  std::string stdin_data;                  // written to stdin, then stdin is closed
  // When set (ssh only): argv runs as is with the channel as its stdin, fed from this source
  // and closed at its end; no signal watcher, env, PYTHONPATH or cwd handling.
  std::shared_ptr<StdinSource> stdin_source;
  // Runs beside the job's ranks on their nodes (the rank probe) and must not wait for the CPUs
  // they hold: slurm starts it as an overlapping step (srun --overlap); the other transports
  // have no resources to wait for and ignore it.
  bool beside_ranks = false;
  // One of dtrain's own steps (a probe, a fetch), which starts nothing outside its session: ssh
  // leaves out what finds a rank's descendants that left it (the subreaper, the scan of the
  // sessions started since, the rank cgroup), a few programs less per start on the node.
  bool own_step = false;
};

// Which of a process's streams bytes came from. A transport that cannot tell them apart (Slurm's
// srun merges them) reports everything as kStdout.
enum class OutputStream { kStdout, kStderr };

class TransportEvents {
 public:
  virtual ~TransportEvents() = default;
  // Output of process `id`. Each stream arrives in the order written; across the two streams,
  // in the order the transport read them.
  virtual void OnOutput(int id, OutputStream stream, std::string_view bytes) = 0;
  // Called once per process, after its last OnOutput.
  virtual void OnExit(int id, const ExitStatus& status) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Starts every process, each in its own process group/session on its node. A node that
  // cannot be reached is reported through OnExit (status.error names node, address and reason)
  // for each of its processes; it never throws for one bad node.
  virtual void Start(const std::vector<ProcessSpec>& procs, TransportEvents& events) = 0;
  // Waits up to timeout_ms, delivering output and exits. Returns false once every process has
  // exited and all its output was delivered.
  virtual bool Poll(int timeout_ms, TransportEvents& events) = 0;
  // Sends `sig` to the whole process group of every process still running, and only to those.
  virtual void SignalAll(int sig) = 0;
  // The same for the processes of node `node_index` only (ssh). A transport whose processes
  // cannot be told apart by node signals them all: local (one node) and Slurm (one srun step
  // holds every task), where no caller asks for one node.
  virtual void SignalNode(int node_index, int sig) {
    (void)node_index;
    SignalAll(sig);
  }
};

// How long a node waits between SIGTERM and SIGKILL when it loses dtrain (a dropped SSH
// connection) and nobody said otherwise (`dtrain launch --grace-period` does).
constexpr double kDefaultRemoteGraceS = 5;

// How the ssh transport looks after nodes while their processes run.
struct SshWatch {
  double grace_period_s = kDefaultRemoteGraceS;  // see kDefaultRemoteGraceS
  // > 0: every node's connection is checked every half second, a node silent this long is lost
  // (its processes end with ExitStatus::lost, the error naming it), and each process's node
  // ends it when it has not heard from dtrain this long (remote_command.h). 0: neither.
  double node_timeout_s = 0;
};

// The transport the cluster file asks for. `grace_period_s`: see kDefaultRemoteGraceS;
// `node_timeout_s`: see SshWatch and MakeSlurmTransport (the local transport ignores it).
std::unique_ptr<Transport> MakeTransport(const ClusterSpec& spec,
                                         double grace_period_s = kDefaultRemoteGraceS,
                                         double node_timeout_s = 0);
// One constructor per transport, each in its own file (local_transport.cpp, ssh_transport.cpp,
// slurm_transport.cpp).
std::unique_ptr<Transport> MakeLocalTransport(const ClusterSpec& spec);
// `take_idle_sessions` false: log in afresh instead of taking idle sessions from the pool
// (launcher/ssh/ssh_session_pool.h) that a transport started next wants more (the clock probe
// beside the ranks' transport). Either way its sessions go to the pool when done.
std::unique_ptr<Transport> MakeSshTransport(const ClusterSpec& spec,
                                            double grace_period_s = kDefaultRemoteGraceS,
                                            bool take_idle_sessions = true);
std::unique_ptr<Transport> MakeSshTransport(const ClusterSpec& spec, const SshWatch& watch,
                                            bool take_idle_sessions = true);
// `node_timeout_s` > 0: a node none of whose running tasks was heard from for that long is lost
// (slurm_transport.cpp); 0: left to Slurm.
std::unique_ptr<Transport> MakeSlurmTransport(const ClusterSpec& spec, double node_timeout_s = 0);

}  // namespace dtrain
