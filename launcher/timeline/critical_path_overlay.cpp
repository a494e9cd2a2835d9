#include "launcher/timeline/critical_path_overlay.h"

#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "launcher/timeline/kineto_rank_merge.h"
#include "launcher/timeline/trace_record.h"
#include "runtime/trace/trace_vocabulary.h"

namespace dtrain {
namespace {

// Flow ids of the path's arrows: in the rank's own range of the merge, past any id a trace writes.
constexpr int64_t kFirstPathFlowId = kKinetoFlowIdsPerRank / 2;

int64_t Nanos(double us) {
  return std::llround(us * 1000.0);
}

std::string Micros(int64_t ns) {
  std::string out;
  AppendMicros(ns, out);
  return out;
}

// HTA's overlay shows these edges by default (DEFAULT_EDGE_TYPES_IN_VIZ).
bool Drawn(PathEdgeType type) {
  return type == PathEdgeType::kDependency || type == PathEdgeType::kLaunchDelay ||
         type == PathEdgeType::kSync;
}

void WriteRank(const RankCriticalPath& path, MergedTraceFile& out) {
  out.Write({{"name", trace::kThreadName},
             {"ph", "M"},
             {"pid", path.rank},
             {"tid", kCriticalPathTrack},
             {"args", {{"name", "critical path: " + path.step}}}});
  out.Write({{"name", "thread_sort_index"},
             {"ph", "M"},
             {"pid", path.rank},
             {"tid", kCriticalPathTrack},
             {"args", {{"sort_index", -1}}}});
  // Slices: the path's edges follow each other in time; one that would start before the last
  // ended (an edge back in time weighs nothing and has none) starts at its end.
  int64_t last_end = INT64_MIN;
  for (const PathLink& link : path.links) {
    if (!link.bound || link.weight_us <= 0) continue;
    int64_t from = Nanos(link.from_us);
    const int64_t to = Nanos(link.to_us);
    if (from < last_end) from = last_end;
    if (to <= from) continue;
    last_end = to;
    out.WriteText(fmt::format(
        R"({{"ph":"X","cat":"critical_path","name":{},"pid":{},"tid":{},"ts":{},"dur":{},)"
        R"("args":{{"bound_by":"{}","edge":"{}","weight_us":{:.3f}}}}})",
        EncodeJsonString(PathWaitText(*link.bound, link.name)), path.rank, kCriticalPathTrack,
        Micros(from), Micros(to - from), PathBoundName(*link.bound), PathEdgeTypeName(link.type),
        link.weight_us));
  }
  int64_t id = static_cast<int64_t>(path.rank) * kKinetoFlowIdsPerRank + kFirstPathFlowId;
  for (const PathLink& link : path.links) {
    if (!Drawn(link.type) || link.from_track < 0 || link.to_track < 0) continue;
    const std::string head = fmt::format(R"("name":"critical_path","cat":"{}","id":{},"pid":{},)",
                                         PathEdgeTypeName(link.type), id++, path.rank);
    const std::string args = fmt::format(R"("args":{{"weight_us":{:.3f}}})", link.weight_us);
    out.WriteText(fmt::format(R"({{"ph":"s",{}"tid":{},"ts":{},{}}})", head, link.from_track,
                              Micros(Nanos(link.from_at_us)), args));
    out.WriteText(fmt::format(R"({{"ph":"f","bp":"e",{}"tid":{},"ts":{},{}}})", head, link.to_track,
                              Micros(Nanos(link.to_at_us)), args));
  }
}

}  // namespace

void WriteCriticalPathOverlay(const RankCriticalPath& path, MergedTraceFile& out) {
  if (path.note.empty()) WriteRank(path, out);
}

}  // namespace dtrain
