// Merges per-rank Chrome traces (dtrain-clip's, Horovod's rank-0 timeline, PyTorch profiler
// traces) into one trace: one process per rank (pid = rank, named "rank R (host)"), one thread
// per track of that rank (tensor, fusion buffer, compute; CPU thread, GPU stream), every
// timestamp on one clock. Streams record by record.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/timeline/kineto_trace.h"
#include "launcher/timeline/merged_trace_file.h"

namespace dtrain {

// What the merge learnt about one input file (from its metadata, its name, its records).
struct RankTraceInfo {
  std::string path;
  int rank = -1;
  std::string host;
  int64_t start_us = 0;  // start_time_since_epoch_in_micros (the rank's own clock)
  bool has_clock_offset = false;
  int64_t clock_offset_us = 0;  // rank 0's clock = this rank's clock + offset
  int64_t clock_rtt_us = 0;
  int64_t shift_us = 0;  // added to the file's ts to get the merged ts
  uint64_t events = 0;
  bool truncated = false;
  bool kineto = false;          // a PyTorch profiler trace (else dtrain-clip's or Horovod's)
  int world_size = 0;           // Kineto: distributedInfo.world_size (0: not given)
  int64_t kineto_shift_ns = 0;  // Kineto: added to the file's ts (in ns) for the merged ts
};

// One event as it goes into the merged trace, for observers such as the summary.
struct MergedEvent {
  int rank;
  int tid;
  const std::string& track;  // the thread's name
  char phase;                // 'B', 'E', 'X', 'i', ...
  const std::string& name;   // for 'E', the name of the span it closes
  int64_t ts_us;             // merged clock
  int64_t dur_us;            // 'X' only
  const nlohmann::json& args;
};

using MergedEventObserver = std::function<void(const MergedEvent&)>;

struct MergeResult {
  std::vector<RankTraceInfo> ranks;  // by rank
  std::vector<std::string> warnings;
  uint64_t events = 0;
};

// Reads `inputs` (each a rank's trace; the rank comes from the file's metadata, else a
// "rank-R" file name, else the next free number), writes the merged array to `output` and
// shows every merged event to `observer` (may be empty). Spans a truncated file leaves open are
// closed at its last timestamp; such files and other repairs are reported in warnings.
// `hosts` (rank -> node, e.g. from job.json) names the ranks it lists, over the host a trace
// records, so that a node has the name dtrain launch gives it; the others keep their trace's.
// PyTorch profiler traces take their rank from distributedInfo (two files of one rank, or of
// different world sizes, are an error) and their clock from baseTimeNanoseconds plus
// `clock_offsets_us` (rank -> launcher's clock minus the rank's node's, from job.json); their
// events go to `kineto_observer`. A PyTorch trace and a dtrain-clip trace of one rank share the
// rank's process. `kineto_rank_done` (may be empty) is called after each PyTorch trace's last
// event, with the merged trace still open: what it writes (what an observer found in that rank's
// events) goes into the merged trace. Throws dtrain::Error on unreadable input or output.
MergeResult MergeTimelines(
    const std::vector<std::string>& inputs, const std::string& output,
    const MergedEventObserver& observer, const std::map<int, std::string>& hosts = {},
    const std::map<int, int64_t>& clock_offsets_us = {},
    const KinetoEventObserver& kineto_observer = {},
    const std::function<void(int rank, MergedTraceFile&)>& kineto_rank_done = {});

}  // namespace dtrain
