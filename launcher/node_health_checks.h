// The launch's health checks of its nodes (LaunchOptions::check_nodes, the doctor's fast checks)
// before the first attempt and before a restart, and what follows from them and from the health
// watch: a node quarantined (for the rest of the job, or until it may return) with the reason
// said on the console and in job.json, a warning (a link whose errors grow, a write that hung)
// said and kept, and after a failed attempt the nodes warned of left out where the job can go on
// without them.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/job_attempt.h"

namespace dtrain {

// Index in the cluster's nodes of the node named `host`, -1 if none.
int NodeIndex(const ClusterSpec& spec, const std::string& host);

// Quarantines node `index`, saying why on the console and in job.json: for the rest of the job,
// or, `may_return` (it was lost, unreachable or unfit), until it passes the health checks again
// while the job runs short of nodes (NodePool::MayReturn).
void Quarantine(Job& job, int index, const std::string& why, bool may_return = false);

// Node `index`, quarantined, takes part again (it passed the health checks, or an elastic job
// took it back): back in the pool, no longer quarantined in job.json, and asked for its results
// at the end again.
void TakeBack(Job& job, int index);

// Quarantine for failing the health checks: with --drain, the Slurm node is drained too, said on
// the console and kept in job.json (an event of kind drained).
void QuarantineUnfit(Job& job, int index, const std::string& why);
// The console's line for it: "dtrain: node node1 quarantined in job J: why" ("for the rest of job
// J" when it may not return).
void SayQuarantined(const std::string& host, const std::string& job, const std::string& why,
                    bool may_return);

// A warning of the health checks about node `host` (a link whose errors grow, a write that hung
// there while other nodes' ended in time; `host` "" for one held against no node): said on the
// console, kept in job.json and in Job::health_warnings, once until the attempt is judged; the job
// goes on.
void RecordHealthWarning(Job& job, const std::string& host, const std::string& what);

// Before the first attempt: the nodes picked for it through the health check; the unfit are
// quarantined and the pool picks again (a spare in an unfit node's place, or fewer nodes with
// --nnodes MIN:MAX), and a pick with new nodes is checked again, all of it (the nodes'
// connections to each other are part of the check). Returns the nodes to start on: empty when
// the pool cannot start the job (NodePool::why_not says why).
// Ctrl-C (any handled signal) cuts either check short, with nothing judged of what it had not
// finished: JobSupervisor::InterruptSignal() tells the caller.
std::vector<int> CheckNodesBeforeStart(Job& job, std::vector<int> nodes);

// Before a restart: the next attempt's nodes (the last attempt's that were not quarantined, and
// the spares or returning nodes picked in place of the others), checked as before the start.
// Returns the seconds it took (taken out of the backoff).
double CheckNodesBeforeRestart(Job& job);

// After an attempt was judged: when it failed (`attempt_failed`: not interrupted, not an error
// every rank hit), the nodes with health warnings since the last attempt was judged are the
// likeliest cause where nothing else is certain (NCCL over a flaky link times out on every
// rank, as it does behind a rank stuck in a write that hangs); each is quarantined where the job
// can go on without it (a spare, or --nnodes MIN) and kept otherwise. Then the warnings are
// forgotten.
void LeaveOutNodesWarnedOf(Job& job, bool attempt_failed);

}  // namespace dtrain
