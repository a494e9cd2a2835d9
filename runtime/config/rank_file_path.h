// RankFilePath: the file each rank writes when a flag names one file for all ranks alike
// (--timeline-path, --metrics-file, given the same on every rank's command line). With more than
// one rank each gets its own, the rank put before the extension (trace.json -> trace.rank-1.json,
// trace -> trace.rank-1): two ranks writing one file interleave their writes and leave neither's
// data whole (a timeline no longer parses). With one rank the path as given.
#pragma once

#include <string>

namespace dtrain::clip {

std::string RankFilePath(const std::string& path, int rank, int world_size);

}  // namespace dtrain::clip
