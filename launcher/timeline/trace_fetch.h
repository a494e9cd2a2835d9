// Gathers the per-rank traces of an SSH job whose ranks wrote them on their own nodes' disks:
// each rank's trace (the DTRAIN_TIMELINE path it was given, as job.json records it) is streamed
// over the launcher's SSH transport into <job>/timeline/rank-R.json on this machine, through a
// temporary file renamed when whole. A trace already here and as large as the node's is kept
// (traces only grow), so shared storage costs one size check per rank and nothing is copied.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/job_record.h"

namespace dtrain {

// What fetching did. A node that cannot be reached is a warning naming it and its ranks, never
// an error: the merge goes on with the traces it has.
struct TraceFetchReport {
  bool contacted = false;    // the job ran over ssh and its nodes were asked
  std::vector<int> fetched;  // ranks whose trace was copied from their node
  uint64_t bytes = 0;        // bytes copied
  int up_to_date = 0;        // ranks whose local trace was already complete
  std::vector<std::string> warnings;
  std::set<std::string> unreachable;  // hosts of the nodes that could not be reached
};

// For jobs of transport ssh only (others return an empty report). SSH options come from
// `cluster_file` if given, else from the cluster file the job was launched with; node addresses
// from job.json. Throws nothing for unreachable nodes or missing files: see warnings.
TraceFetchReport FetchRemoteTraces(const std::string& job_dir, const JobSummary& job,
                                   const std::string& cluster_file);

// The same for metrics/rank-R.jsonl (what ranks wrote under $DTRAIN_LOG_DIR on their nodes),
// into <job>/metrics/; a node without the file is no warning (not every job writes metrics).
// `ssh` (the launcher's own options, for -H jobs that have no cluster file) wins when given.
TraceFetchReport FetchRemoteMetrics(const std::string& job_dir, const JobSummary& job,
                                    const std::string& cluster_file,
                                    const SshOptions* ssh = nullptr);

// The PyTorch profiler traces (names ending .json or .json.gz) that ranks wrote into
// $DTRAIN_TRACE_DIR on their nodes, into <job>/timeline/ under the same names (a name found on
// several nodes becomes NODE-NAME); dtrain-clip's rank-R.json there are FetchRemoteTraces'.
// The same rules as above: kept when as large here, only missing ones while the job runs.
// Nodes in `skip` (found unreachable by a fetch just before) are not asked again.
TraceFetchReport FetchRemoteProfilerTraces(const std::string& job_dir, const JobSummary& job,
                                           const std::string& cluster_file,
                                           const SshOptions* ssh = nullptr,
                                           const std::set<std::string>& skip = {});

// Rank `rank`'s metrics as `node` holds them from an earlier attempt ($DTRAIN_LOG_DIR/metrics/
// rank-R.jsonl there; the node may run another rank now), into
// <job>/metrics/attempt-A/rank-R.jsonl: the steps of an attempt whose rank 0's node was lost
// (attempt_steps.h).
TraceFetchReport FetchEarlierRankMetrics(const std::string& job_dir, const JobSummary& job,
                                         const std::string& cluster_file, const SshOptions* ssh,
                                         int attempt, int rank, const NodeSpec& node);

// The @record error files (TORCHELASTIC_ERROR_FILE) of attempt `attempt` that ranks wrote on
// their nodes, into <job>/errors/attempt-A/rank-R.json; a rank without one is no warning (only
// a rank that raised writes one).
TraceFetchReport FetchRemoteErrorFiles(const std::string& job_dir, const JobSummary& job,
                                       const SshOptions& ssh, int attempt);

}  // namespace dtrain
