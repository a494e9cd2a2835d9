// Each rank's critical path drawn into the merged trace, as HolisticTraceAnalysis' overlay draws
// it (overlay_critical_path_analysis), so that it can be followed in Perfetto or chrome://tracing:
// - a track "critical path: STEP" at the top of the rank's process, one slice per stretch of the
//   path that takes time, named after what it waits on (args: bound_by, edge, weight_us); its
//   slices add up to the path's length, bound by bound as in the summary;
// - an arrow (flow event, name "critical_path", cat HTA's edge type) for each edge of the path
//   that HTA's overlay shows by default: the dependencies from one top-level operator to the next,
//   kernel launches and synchronisation, from the event of one node to the event of the other.
// HTA also sets args.critical on the events of the path; the merge has written them before the
// path is known, so the track stands for that.
#pragma once

#include "launcher/timeline/critical_path.h"
#include "launcher/timeline/merged_trace_file.h"

namespace dtrain {

// The track's tid in each rank's process (below the tracks of the rank's PyTorch trace, above
// those of a dtrain-clip trace).
constexpr int kCriticalPathTrack = 99999;

// Writes the overlay of one rank's path; nothing when it has none (a note).
void WriteCriticalPathOverlay(const RankCriticalPath& path, MergedTraceFile& out);

}  // namespace dtrain
