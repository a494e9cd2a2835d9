// The one place that decides which nodes a launch runs on and says why: -c FILE, else -H or
// --hostfile, else ./cluster.yaml, else this machine alone (--standalone: always); then -np,
// --nproc-per-node, -x, the env file and the rendezvous address and port. The banner prints what it
// records.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/local_device_count.h"
#include "launcher/port_reservation.h"
#include "launcher/torchrun_rendezvous.h"

namespace dtrain {

// What the command line (and the caller's environment) says about nodes.
struct ClusterChoice {
  std::string cluster_file;           // -c; "" = ./cluster.yaml when there is no -H/--hostfile
  std::string hosts;                  // -H host:slots,...
  bool hosts_discovered = false;      // `hosts` is what --host-discovery-script listed (no -H)
  std::string hostfile;               // --hostfile
  int nproc_per_node = 0;             // > 0 overrides every node's slots
  std::string nproc_kind;             // gpu, cpu or auto: every node's slots counted (torchrun's)
  int np = 0;                         // > 0: this many ranks in all, filling nodes in order
  int master_port = 0;                // > 0: --master-port
  int ssh_port = 0;                   // > 0: -p, every node's ssh port (horovodrun's)
  std::string ssh_identity_file;      // -i: the ssh key (horovodrun's --ssh-identity-file)
  std::vector<std::string> pass_env;  // -x NAME (the caller's value) or -x NAME=VALUE
  TorchrunRendezvous torchrun;
  // horovodrun's options that set every rank's environment (horovodrun_options.h): name ->
  // value as given ("" for a flag). Applied after -x, as horovodrun applies them over the
  // environment.
  std::map<std::string, std::string> horovodrun;
  int start_timeout_s = 0;  // > 0: horovodrun's --start-timeout, every node's ssh connect timeout
};

// The cluster a launch runs on, with each choice explained for the banner.
struct ChosenCluster {
  ClusterSpec spec;       // slots, env, transport and rendezvous port final
  std::string source;     // "cluster file ./cluster.yaml", "-H a:2,b:2", "no cluster file"
  std::string ranks_why;  // "2 per node (NPROC_PER_NODE=2)"
  // MASTER_ADDR given to every rank; "" = the first node's address where the ranks run (for
  // Slurm, the first allocated node's)
  std::string master_addr;
  std::string port_why;            // "--master-port", "MASTER_PORT in the environment", ...
  std::string env_file;            // the env file read, or ""
  std::vector<std::string> notes;  // settings that were seen but did not apply, and why
  std::shared_ptr<PortReservation> port_hold;  // set when a free port was picked
};

// Throws UsageError when the choices contradict each other or a file cannot be read.
// `count_devices` asks ssh nodes that are not this machine for their GPUs and CPUs, for
// --nproc-per-node gpu|cpu|auto (gpu and auto: only nodes without a gpus: list); none: such
// nodes are refused.
ChosenCluster ChooseCluster(const ClusterChoice& choice,
                            const NodeDeviceCounter& count_devices = nullptr);

}  // namespace dtrain
