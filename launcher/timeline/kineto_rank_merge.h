// One rank's PyTorch profiler (Kineto) trace into the merged trace: every CPU thread and GPU
// stream of the rank becomes a thread of the rank's process ("CPU thread T", "GPU D stream S"),
// timestamps move onto the common clock (baseTimeNanoseconds plus the node's clock offset) with
// their nanoseconds kept, flow ids are made unique per rank. Streams record by record.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launcher/timeline/kineto_trace.h"
#include "launcher/timeline/merged_trace_file.h"
#include "launcher/timeline/timeline_merge.h"
#include "launcher/timeline/trace_reader.h"

namespace dtrain {

// Flow ids are per file: the merge gives each rank the ids from rank * this on, so that arrows
// never cross ranks (a trace's own ids stay far below it).
constexpr int64_t kKinetoFlowIdsPerRank = int64_t{1} << 40;

// Pass 1: fills `info` from the header of the open `reader` (a Kineto trace): rank, world size,
// and a start on the rank's own clock that precedes its events. Throws dtrain::Error naming the
// file for a header it cannot use.
void ScanKinetoTrace(TraceReader& reader, RankTraceInfo& info);

// Pass 2. `info.kineto_shift_ns` places the file's ts on the merged clock. Throws dtrain::Error
// naming the file for a record that is not valid JSON or a file cut short (Kineto writes a trace
// whole, so a short one is damaged, not a rank killed mid-write).
void MergeKinetoRank(RankTraceInfo& info, MergedTraceFile& out,
                     const KinetoEventObserver& observer);

}  // namespace dtrain
