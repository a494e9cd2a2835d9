// What a launch does with a straggler (hangs/straggler_watch.h): says it (a warning on the
// console, an event "straggler" in job.json) and, under --on-straggler leave, when the job can go
// on without its node (a spare, or --nnodes MIN below the nodes it runs on), stops the attempt
// and restarts at once without that node, quarantined for the rest of the job (the command starts
// again, as after a failure: it resumes from its checkpoint if it does so then). That restart is dtrain's choice, not a failure: it is not counted against
// --max-restarts (a node leaves this way once, so there are at most as many as nodes).
#pragma once

#include "launcher/hangs/straggler_watch.h"
#include "launcher/health_watch.h"
#include "launcher/job_attempt.h"

namespace dtrain {

// Says the straggler; true when its node is to leave the job.
bool SayStraggler(Job& job, const Straggler& straggler);

// The attempt was stopped for `slow` (UnfitNode::straggler): its node is quarantined and the job
// restarts on the nodes the pool picks. False when it cannot (the node is not the cluster's).
bool LeaveSlowNode(Job& job, const UnfitNode& slow);

}  // namespace dtrain
