// The graph a critical path is found in, as HolisticTraceAnalysis 0.5 builds it (CPGraph): two
// nodes per CPU operator, CUDA call and GPU activity of one step (its start and its end), edges for
// the time spent in each, the nesting of operators on a thread, launches, gaps between kernels and
// waits of synchronisation, and the longest path through it as networkx finds it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "launcher/timeline/name_table.h"

namespace dtrain {

enum class PathEventKind : uint8_t { kOperator, kCall, kCpuOther, kGpu, kSync };

// One profiler event, as the critical path keeps it.
struct PathEvent {
  double ts = 0, end = 0;  // µs on the merged clock
  int64_t stream = -1;
  int64_t correlation = -1;
  int64_t wait_on_stream = -1;
  int64_t wait_on_record = -1;
  uint32_t name = 0;    // into the builder's names
  int32_t thread = -1;  // the event's track in the merged trace
  PathEventKind kind = PathEventKind::kCpuOther;
};

inline bool OnCpu(PathEventKind kind) {
  return kind == PathEventKind::kOperator || kind == PathEventKind::kCall ||
         kind == PathEventKind::kCpuOther;
}

// HTA's edge types (CPEdgeType).
enum class PathEdgeType : uint8_t { kOperator, kDependency, kLaunchDelay, kKernelGap, kSync };
// HTA's name of an edge type: "critical_path_operator", ...
const char* PathEdgeTypeName(PathEdgeType type);

struct PathNode {
  double ts;
  int32_t event;
  bool start;
};

struct PathEdge {
  int32_t from, to;
  double weight;
  PathEdgeType type;
  int32_t event;  // the event the edge's time is spent in; -1: none (dependencies, launches)
};

// The graph of one step: two nodes per event that has any, edges in the order added (which,
// as in networkx, decides between paths of equal length).
class PathGraph {
 public:
  PathGraph(const std::vector<PathEvent>& events, const std::vector<int32_t>& with_nodes);

  int32_t Start(int32_t event) const { return event < 0 ? -1 : start_[event]; }
  int32_t End(int32_t event) const { return event < 0 ? -1 : end_[event]; }
  const PathNode& node(int32_t id) const { return nodes_[id]; }
  size_t node_count() const { return nodes_.size(); }
  size_t edge_count() const { return edges_.size(); }
  const PathEdge& edge(int32_t id) const { return edges_[id]; }

  // Adds (or, as networkx does, replaces the data of) the edge from -> to. Spans and gaps weigh
  // the time between their nodes; dependencies, synchronisation and `zero_weight` nothing; an
  // edge back in time by 1 µs or more nothing.
  void Add(int32_t from, int32_t to, PathEdgeType type, bool zero_weight = false,
           int32_t event = -1);

  // HTA's attribution of a span between two nodes of nested operators: a start node's event
  // holds what follows it, an end node's event what precedes it, and the time between one
  // operator's end and its sibling's start belongs to their parent.
  int32_t Attribute(int32_t from, int32_t to, int32_t parent) const;

  // The longest path, as networkx's dag_longest_path walks it (topological generations, the
  // first best predecessor, the first farthest node). Edge ids along it; nullopt when the graph
  // has a cycle (events whose times contradict each other).
  std::optional<std::vector<int32_t>> LongestPath() const;

 private:
  std::vector<PathNode> nodes_;
  std::vector<int32_t> start_, end_;  // by event
  std::vector<PathEdge> edges_;
  std::vector<std::vector<int32_t>> succ_, pred_;
  std::unordered_map<uint64_t, int32_t> by_ends_;
};

// Adds one CPU thread's edges, as HTA walks the thread's call stack: each operator's span,
// nested operators' starts and ends in sequence, and a weightless dependency from one top-level
// operator to the next. `thread`: the thread's events in the step; `names`: their names (the time
// inside a blocking CUDA call weighs nothing).
void AddThreadEdges(PathGraph& graph, const std::vector<PathEvent>& events, const NameTable& names,
                    const std::vector<int32_t>& thread);

}  // namespace dtrain
