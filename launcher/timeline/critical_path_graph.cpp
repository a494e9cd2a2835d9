// PathGraph and the edges of a thread's call stack, after HTA 0.5's CPGraph
// (hta/analyzers/critical_path_analysis.py) and its CallStackGraph (hta/common/call_stack.py).
#include "launcher/timeline/critical_path_graph.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace dtrain {

const char* PathEdgeTypeName(PathEdgeType type) {
  switch (type) {
    case PathEdgeType::kOperator:
      return "critical_path_operator";
    case PathEdgeType::kDependency:
      return "critical_path_dependency";
    case PathEdgeType::kLaunchDelay:
      return "critical_path_kernel_launch_delay";
    case PathEdgeType::kKernelGap:
      return "critical_path_kernel_kernel_delay";
    case PathEdgeType::kSync:
      return "critical_path_sync_dependency";
  }
  return "";
}

PathGraph::PathGraph(const std::vector<PathEvent>& events, const std::vector<int32_t>& with_nodes)
    : start_(events.size(), -1), end_(events.size(), -1) {
  std::vector<PathNode> starts, ends;
  for (int32_t e : with_nodes) {
    starts.push_back({events[e].ts, e, true});
    ends.push_back({events[e].end, e, false});
  }
  nodes_ = std::move(starts);
  nodes_.insert(nodes_.end(), ends.begin(), ends.end());
  std::stable_sort(nodes_.begin(), nodes_.end(),
                   [](const PathNode& a, const PathNode& b) { return a.ts < b.ts; });
  for (size_t i = 0; i < nodes_.size(); ++i) {
    (nodes_[i].start ? start_ : end_)[nodes_[i].event] = static_cast<int32_t>(i);
  }
  succ_.resize(nodes_.size());
  pred_.resize(nodes_.size());
}

void PathGraph::Add(int32_t from, int32_t to, PathEdgeType type, bool zero_weight, int32_t event) {
  if (from < 0 || to < 0 || from == to) return;
  const bool weightless =
      zero_weight || type == PathEdgeType::kDependency || type == PathEdgeType::kSync;
  double weight = weightless ? 0.0 : nodes_[to].ts - nodes_[from].ts;
  if (weight <= -1) weight = 0;
  const PathEdge e{from, to, weight, type, event};
  const uint64_t key = (static_cast<uint64_t>(from) << 32) | static_cast<uint32_t>(to);
  auto [it, added] = by_ends_.try_emplace(key, static_cast<int32_t>(edges_.size()));
  if (!added) {
    edges_[it->second] = e;
    return;
  }
  edges_.push_back(e);
  succ_[from].push_back(it->second);
  pred_[to].push_back(it->second);
}

int32_t PathGraph::Attribute(int32_t from, int32_t to, int32_t parent) const {
  if (nodes_[from].start) return nodes_[from].event;
  if (!nodes_[to].start) return nodes_[to].event;
  return parent;
}

std::optional<std::vector<int32_t>> PathGraph::LongestPath() const {
  const size_t n = nodes_.size();
  std::vector<int32_t> indegree(n);
  for (size_t v = 0; v < n; ++v) indegree[v] = static_cast<int32_t>(pred_[v].size());
  std::vector<int32_t> order, generation;
  for (size_t v = 0; v < n; ++v) {
    if (indegree[v] == 0) generation.push_back(static_cast<int32_t>(v));
  }
  while (!generation.empty()) {
    std::vector<int32_t> next;
    for (int32_t v : generation) {
      order.push_back(v);
      for (int32_t e : succ_[v]) {
        if (--indegree[edges_[e].to] == 0) next.push_back(edges_[e].to);
      }
    }
    generation = std::move(next);
  }
  if (order.size() != n) return std::nullopt;
  std::vector<double> length(n, 0);
  std::vector<int32_t> via(n, -1);  // the edge into a node on its longest path
  for (int32_t v : order) {
    double best = 0;
    int32_t best_edge = -1;
    for (int32_t e : pred_[v]) {
      const double l = length[edges_[e].from] + edges_[e].weight;
      if (best_edge < 0 || l > best) {
        best = l;
        best_edge = e;
      }
    }
    if (best_edge >= 0 && best >= 0) {
      length[v] = best;
      via[v] = best_edge;
    }
  }
  int32_t last = -1;
  for (int32_t v : order) {
    if (last < 0 || length[v] > length[last]) last = v;
  }
  std::vector<int32_t> path;
  for (int32_t v = last; v >= 0 && via[v] >= 0; v = edges_[via[v]].from) path.push_back(via[v]);
  std::reverse(path.begin(), path.end());
  return path;
}

namespace {

// HTA's BLOCKING_SYNC_CALLS: the CPU time inside them is a wait, not work; it weighs nothing.
bool IsBlockingCall(std::string_view name) {
  return name == "cudaDeviceSynchronize" || name == "cudaStreamSynchronize" ||
         name == "cudaEventQuery" || name == "cudaEventSynchronize" || name == "cudaMemcpy" ||
         name == "cudaMemcpyAsync";
}

// HTA's order of the starts and ends of one thread's events (call_stack.compare_events): by
// time; at the same time, ends before starts, the longer event's start first and its end last.
struct StackPoint {
  int32_t event;
  double time, dur;
  bool start;
};

int ComparePoints(const StackPoint& x, const StackPoint& y) {
  if (x.event == y.event) return x.start ? -1 : 1;
  if (x.time != y.time) return x.time < y.time ? -1 : 1;
  if (x.start == y.start) {
    if (x.start) {
      if (x.dur == y.dur) return x.event < y.event ? -1 : x.event > y.event ? 1 : 0;
      return x.dur < y.dur ? 1 : -1;
    }
    if (x.dur == y.dur) return x.event < y.event ? 1 : x.event > y.event ? -1 : 0;
    return x.dur < y.dur ? -1 : 1;
  }
  return x.start ? 1 : -1;  // both last longer than 0 here
}

// One thread's events as HTA's CallStackGraph nests them: children of each event (and of the
// root, -1) in the order they start.
struct CallStack {
  std::unordered_map<int32_t, std::vector<int32_t>> children;
  std::unordered_map<int32_t, int32_t> parent;
};

CallStack NestThread(const std::vector<PathEvent>& events, const std::vector<int32_t>& thread) {
  std::vector<StackPoint> points;
  points.reserve(thread.size() * 2);
  for (int32_t e : thread) {
    const double dur = events[e].end - events[e].ts;
    points.push_back({e, events[e].ts, dur, true});
    points.push_back({e, events[e].end, dur, false});
  }
  std::sort(points.begin(), points.end(),
            [](const StackPoint& a, const StackPoint& b) { return ComparePoints(a, b) < 0; });
  CallStack out;
  std::vector<int32_t> stack;
  for (const StackPoint& p : points) {
    if (p.start) {
      const int32_t parent = stack.empty() ? -1 : stack.back();
      out.children[parent].push_back(p.event);
      out.parent[p.event] = parent;
      stack.push_back(p.event);
    } else if (!stack.empty()) {
      stack.pop_back();
    }
  }
  return out;
}

// Walks one thread's call stack depth first, adding HTA's edges: each operator's span, nested
// operators' starts and ends in sequence, and a weightless dependency from one top-level operator
// to the next.
class ThreadWalk {
 public:
  ThreadWalk(PathGraph& graph, const std::vector<PathEvent>& events, const NameTable& names,
             const CallStack& stack)
      : graph_(graph), events_(events), names_(names), stack_(stack) {}

  void Run() {
    // Iterative depth-first: (event, next child index).
    std::vector<std::pair<int32_t, size_t>> todo{{-1, 0}};
    Enter(-1);
    while (!todo.empty()) {
      auto& [event, next] = todo.back();
      auto it = stack_.children.find(event);
      if (it != stack_.children.end() && next < it->second.size()) {
        const int32_t child = it->second[next++];
        Enter(child);
        todo.push_back({child, 0});
        continue;
      }
      Exit(event);
      todo.pop_back();
    }
  }

 private:
  int32_t ParentOf(int32_t event) const {
    auto it = stack_.parent.find(event);
    return it == stack_.parent.end() ? -1 : it->second;
  }

  void Enter(int32_t event) {
    const int32_t start = graph_.Start(event);
    if (start < 0 || graph_.End(event) < 0) return;
    if (depth_ == 0 && last_top_ >= 0) graph_.Add(last_top_, start, PathEdgeType::kDependency);
    ++depth_;
    if (last_ >= 0) {
      graph_.Add(last_, start, PathEdgeType::kOperator, false,
                 graph_.Attribute(last_, start, last_parent_));
    }
    last_ = start;
    last_parent_ = ParentOf(event);
  }

  void Exit(int32_t event) {
    const int32_t end = graph_.End(event);
    if (graph_.Start(event) < 0 || end < 0) return;
    --depth_;
    if (last_ >= 0) {
      graph_.Add(last_, end, PathEdgeType::kOperator, IsBlockingCall(names_[events_[event].name]),
                 graph_.Attribute(last_, end, last_parent_));
    }
    if (depth_ == 0) {
      last_ = -1;
      last_top_ = end;
    } else {
      last_ = end;
      last_parent_ = ParentOf(event);
    }
  }

  PathGraph& graph_;
  const std::vector<PathEvent>& events_;
  const NameTable& names_;
  const CallStack& stack_;
  int32_t last_ = -1;      // the node the next span starts from
  int32_t last_top_ = -1;  // the end of the last top-level operator
  int32_t last_parent_ = -1;
  int depth_ = 0;
};

}  // namespace

void AddThreadEdges(PathGraph& graph, const std::vector<PathEvent>& events, const NameTable& names,
                    const std::vector<int32_t>& thread) {
  const CallStack stack = NestThread(events, thread);
  ThreadWalk(graph, events, names, stack).Run();
}

}  // namespace dtrain
