// torchrun's rendezvous options (--standalone, --rdzv-endpoint, --rdzv-backend, --rdzv-id,
// --rdzv-conf) read as dtrain reads them: the job's store is dtrain's own, on the first node.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

// torchrun's rendezvous options, as dtrain reads them: the job's store is dtrain's own, on the
// first node, so they choose a port, this machine and the run id, and the rest is said not to
// apply. --standalone overrides the others, as torchrun's does.
struct TorchrunRendezvous {
  bool standalone = false;  // --standalone: this machine alone, a free port (or --master-port)
  std::string endpoint;     // --rdzv-endpoint HOST[:PORT]: PORT as --master-port
  std::string backend;      // --rdzv-backend: c10d or static; etcd and etcd-v2 are not contacted
  std::string id;           // --rdzv-id: TORCHELASTIC_RUN_ID ("" = the job's name)
  std::string conf;         // --rdzv-conf KEY=VALUE,...: join_timeout, last_call_timeout
};

// torchrun's join_timeout default: how long its rendezvous waits for --nnodes MIN nodes.
constexpr double kJoinTimeoutS = 600;

// --rdzv-conf's join_timeout in seconds (torchrun's 600 when not given): how long a job short of
// nodes waits for quarantined ones to return before it gives up (node_return_wait.h). Throws
// UsageError for a conf torchrun would refuse to read (an item without '=') or a join_timeout
// that is no number of seconds > 0.
double JoinTimeoutS(const TorchrunRendezvous& rdzv);

// --rdzv-conf's last_call_timeout in seconds (0 when not given: dtrain does not wait): how long
// an attempt about to run on fewer than --nnodes MAX nodes waits for quarantined ones to return
// (node_return_wait.h). Throws UsageError as JoinTimeoutS does, for a value that is no number of
// seconds >= 0.
double LastCallTimeoutS(const TorchrunRendezvous& rdzv);

// The rendezvous port the options name (--rdzv-endpoint's; 0: none), with a note in `notes` for
// each option that does not apply on `spec`'s nodes (--rdzv-conf's keys but join_timeout and
// last_call_timeout). Throws UsageError for an endpoint torchrun would refuse, or a port other than
// `master_port` (> 0:
// --master-port).
int TorchrunRendezvousPort(const TorchrunRendezvous& rdzv, int master_port, const ClusterSpec& spec,
                           std::vector<std::string>& notes);

// "A is not used", "A and B are not used".
std::string NotUsed(const std::vector<std::string>& settings);

}  // namespace dtrain
