// A job short of nodes between two attempts waits for quarantined nodes to come back, as
// torchrun's agents wait at their rendezvous for --nnodes MIN nodes up to its join_timeout
// (--rdzv-conf join_timeout=S, 600 s by default). The nodes that may return (lost, unreachable
// or unfit, not back once before) are health-checked every --health-watch S; one that passes
// kReturnRounds rounds in a row is taken back, and the wait ends once the pool can pick an
// attempt's nodes. Without the health watch no node can be seen to be fit, and nothing is waited
// for.
#pragma once

#include <vector>

#include "launcher/job_attempt.h"

namespace dtrain {

// The nodes of the next attempt once enough came back (each said on the console and recorded in
// job.json as node_returned); empty when none may return, the wait ran out (`waited_s` says how
// long it took) or the user interrupted it.
std::vector<int> WaitForReturningNodes(Job& job, double& waited_s);

}  // namespace dtrain
