// The end of a job on ssh nodes: the metrics and PyTorch traces its ranks wrote on nodes without
// shared storage come back into the job folder; files already there and complete (shared
// storage) are left as they are. For an attempt whose rank 0 ran on another node than the last
// attempt's, that rank's metrics (or, its node lost, another of its ranks') come back too, into
// <job>/metrics/attempt-A/ (attempt_steps.h).
#pragma once

#include <set>
#include <string>

#include "launcher/cluster_spec.h"

namespace dtrain {

// Nodes in `lost` are not asked: nothing at the end of a job waits on a node that stopped
// answering (`dtrain logs`/`dtrain timeline` fetch its files later, once it is back). What could
// not be fetched is a warning on stderr, never an error.
void FetchNodeResults(const std::string& job_dir, const ClusterSpec& spec,
                      const std::set<std::string>& lost);

}  // namespace dtrain
