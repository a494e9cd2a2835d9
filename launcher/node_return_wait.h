// A job short of nodes at its start or between two attempts waits for quarantined nodes to come
// back, as torchrun's agents wait at their rendezvous for --nnodes MIN nodes up to its join_timeout
// (--rdzv-conf join_timeout=S, 600 s by default; an elastic Horovod job waits --elastic-timeout,
// as horovodrun's driver waits for --min-np slots). The nodes that may return (lost, unreachable
// or unfit, not back once before) are health-checked every --health-watch S; one that passes
// kReturnRounds rounds in a row is taken back, and the wait ends once the pool can pick an
// attempt's nodes. Without the health watch no node can be seen to be fit, and nothing is waited
// for. With --rdzv-conf last_call_timeout=S, a job about to start or restart on fewer than
// --nnodes MAX nodes waits up to S for the nodes that may return, as torchrun's last call does.
#pragma once

#include <string>
#include <vector>

#include "launcher/job_attempt.h"

namespace dtrain {

// The nodes of the next attempt once enough came back (each said on the console and recorded in
// job.json as node_returned); empty when none may return, the wait ran out (`waited_s` says how
// long it took) or the user interrupted it.
std::vector<int> WaitForReturningNodes(Job& job, double& waited_s);

// torchrun's last call: an attempt about to run on `nodes`, fewer than --nnodes MAX while some
// quarantined node may return, first waits up to --rdzv-conf last_call_timeout (said on the
// console and in job.json) until the pool has MAX, as torchrun's rendezvous closes at MAX nodes
// or last_call_timeout after it had MIN. No wait without last_call_timeout (dtrain's default: it
// sees which nodes are out and takes one back later with a restart), the health watch, or a
// node that may return. `before`: "starts" or "restarts". Returns the attempt's nodes, those
// that came back among them; an interrupt ends the wait with `nodes`
// (JobSupervisor::InterruptSignal() says so). `waited_s`: how long it waited.
std::vector<int> WaitLastCall(Job& job, const std::vector<int>& nodes, const std::string& before,
                              double& waited_s);

// Whether a job short of nodes waits for them rather than failing: the health watch is on
// (--health-watch S), so a node can be seen to be fit again.
bool MayWaitForNodes(const JobSettings& settings);

// The first attempt's nodes of a job short of nodes at its start, once enough came back: as
// torchrun's first rendezvous waits for nodes whose agents have not joined, the job waits when
// some node could not be reached (`unreached`). A node unfit at the start's health check
// (`after_check`) is not waited for: it would not be fit again by itself. Throws Error naming
// the job, what it is short of and what to do, with no rank started and job.json saying so, when
// it does not wait, the wait ran out or was interrupted (exit 128 + signal).
std::vector<int> WaitForNodesAtStart(Job& job, bool after_check, bool unreached);

}  // namespace dtrain
