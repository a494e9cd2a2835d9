// The link bandwidth test behind `dtrain doctor --bandwidth` (`dtrain-clip bandwidth`): allreduce
// bus bandwidth over every rank, then over pairs of nodes and within each node, each measured
// with the job's backend (NCCL on GPUs, Gloo on CPUs). Every figure is printed as one line
// "dtrain-bandwidth {json}" by the lowest rank of the group measured; the doctor reads them
// from the rank logs and names the slow node or link.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/dist/bandwidth_schedule.h"
#include "runtime/dist/distributed.h"

namespace dtrain::clip {

struct LinkBandwidthOptions {
  int64_t bytes = 8 << 20;  // per allreduce
  int iterations = 5;       // timed, after one untimed warm-up
  bool pairs = true;        // the pairwise rounds between nodes
};

// Collective over every rank of `dist`. Rank placement is node by node (DistEnv); pairs and
// node groups take each node's local rank 0 / all its local ranks.
void RunLinkBandwidth(Distributed& dist, const LinkBandwidthOptions& options, std::FILE* out);

}  // namespace dtrain::clip
