// NodePool: which of the cluster's nodes each attempt of a job runs on. The job's size is its
// non-spare nodes (or --nnodes MAX); spares wait until a node is quarantined. A node that was
// lost, or blamed for kFailuresToQuarantine failed attempts, is quarantined: never used again by
// this job. An attempt takes the healthy non-spare nodes, then healthy spares, in the cluster
// file's order, up to the job's size; fewer than the minimum (--nnodes MIN) ends the job.
// A node quarantined for being lost, unreachable or unfit may return once, when it passes the
// health checks again (NodeReturns, launcher/health_watch.h): torchrun's agents take a node back
// with --nnodes MIN:MAX too.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

constexpr int kFailuresToQuarantine = 2;

// --nnodes MIN:MAX (torchrun's); 0 = not given.
struct NodeCount {
  int min = 0;
  int max = 0;
};

// "3" -> {3, 3}, "2:4" -> {2, 4}. Throws UsageError naming --nnodes.
NodeCount ParseNodeCount(const std::string& text);

// --spares N: the last N listed nodes become spares (beside those the file marks). Throws
// UsageError when no node would be left to run the job.
void MarkSpares(std::vector<NodeSpec>& nodes, int spares_from_end);

class NodePool {
 public:
  // Spares are the nodes marked `spare` (MarkSpares). Throws UsageError when --nnodes asks for
  // more nodes than are not spares.
  NodePool(const std::vector<NodeSpec>& nodes, NodeCount count);

  // Indices into the cluster's nodes for the next attempt, in the cluster file's order; empty
  // when fewer than the minimum are healthy (why_not() says so).
  std::vector<int> Pick() const;
  std::string why_not() const;

  // A failed attempt blamed on node `index`: `lost` (or a node that could not be reached)
  // quarantines it at once, anything else after kFailuresToQuarantine. Returns the reason when
  // this call quarantined it ("" otherwise).
  std::string Blame(int index, bool lost, const std::string& cause);
  // Quarantines node `index` at once for `why` (it failed the health check before a restart).
  // `may_return`: the checks can tell when it is fit again (it was unreachable or unfit).
  void Quarantine(int index, const std::string& why, bool may_return = false);
  // The quarantined nodes that may return: quarantined as lost, unreachable or unfit, and not
  // returned before in this job.
  std::vector<int> MayReturn() const;
  // Node `index` (one of MayReturn) is healthy again, its failures forgotten.
  void Return(int index);
  // Whether enough healthy nodes are left without node `index` for the job to go on (a spare,
  // or --nnodes MIN below the healthy nodes).
  bool CanGoOnWithout(int index) const;

  bool spare(int index) const { return nodes_[index].spare; }
  const std::string& host(int index) const { return nodes_[index].host; }
  const std::string& quarantined(int index) const { return nodes_[index].quarantined; }
  int min_nodes() const { return min_; }
  int max_nodes() const { return max_; }
  int size() const { return static_cast<int>(nodes_.size()); }

 private:
  struct Node {
    std::string host;
    bool spare = false;
    int failures = 0;
    std::string quarantined;  // why; "" = healthy
    bool may_return = false;  // quarantined as lost, unreachable or unfit
    bool returned = false;    // it came back once: quarantined again, it stays out
  };
  std::vector<Node> nodes_;
  int min_ = 0;
  int max_ = 0;
};

}  // namespace dtrain
