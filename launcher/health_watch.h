// The health watch of a running attempt: every `interval_s` seconds, on a thread of its own, the
// attempt's nodes go through the doctor's fast health checks (LaunchOptions::check_nodes, nodes
// that cannot be probed left to the node timeout). A node that turns unfit while the job runs (a
// GPU fallen off the bus, an Xid in the kernel log, a wedged nvidia-smi) is reported to the job
// supervisor, which stops the attempt as for a failing rank; the node is then quarantined and a
// restart goes on without it. A rank that hangs on a dead GPU is found within the interval, not
// after the stall timeout or NCCL's own (10 minutes). What only warns (a link whose errors grow)
// is handed on as it comes, and the job goes on. Never blocks the supervisor's loop.
// A second watch of the same kind follows the nodes quarantined as lost, unreachable or unfit
// while the job runs short of nodes (WatchFor::kReturns): one that answers and passes the checks
// in kReturnRounds rounds in a row is reported, and the supervisor restarts the job to take it
// back, as torchrun's agents do when a node joins a job running below --nnodes MAX.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

// Seconds between the rounds of the health watch by default (ssh and Slurm nodes).
constexpr double kHealthWatchS = 30;

// How many rounds in a row a quarantined node must pass before it returns to the job.
constexpr int kReturnRounds = 2;

// How many of the job's nodes a returning node is tested with, in the peer test of the checks it
// must pass kReturnRounds times in a row: enough to tell a node cut off from a pair that cannot
// connect, few enough that a large job's nodes are not all probed again each round of a wait.
constexpr size_t kReturnWitnesses = 3;

// What a watch looks for in its nodes.
enum class WatchFor {
  kUnfit,    // the attempt's nodes: the first that turns unfit (Take)
  kReturns,  // quarantined nodes: the first fit kReturnRounds rounds in a row (TakeReturned)
};

// What a health check found: the nodes unfit to run (host -> why, the error findings naming it)
// and, apart, what is news but no reason to stop a job (host -> what, any number a host: a link
// whose errors grow, a write that hung there while other nodes' ended in time; host "" for one
// held against no node, a write that hung on every node).
struct NodeHealthFindings {
  NodeHealthFindings() = default;
  NodeHealthFindings(std::map<std::string, std::string> unfit_nodes)  // NOLINT: implicit
      : unfit(std::move(unfit_nodes)) {}
  std::map<std::string, std::string> unfit;
  std::multimap<std::string, std::string> warnings;
};

// `count_unreached`: whether a node that cannot be probed is unfit (before a start or restart)
// or left out (while the job runs); `cancelled` (may be empty) is asked while it runs: true ends
// it at once.
using NodeHealthCheck = std::function<NodeHealthFindings(const ClusterSpec&, bool count_unreached,
                                                         const std::function<bool()>& cancelled)>;

// A warning of the watch's about one node, with when it came.
struct NodeWarning {
  std::string host;
  std::string what;
  double found_after_s = 0;  // since the watch started
};

struct UnfitNode {
  std::string host;
  std::string why;           // the error findings naming it
  double found_after_s = 0;  // since the watch started
  bool straggler = false;    // not unfit: slow, named by the straggler watch (it leaves the job)
  // The other nodes unfit for the same reason (two nodes that cannot connect, named as a pair
  // by the peer test): which of them is at fault is the check before the restart's to tell.
  std::vector<std::string> alike;
};

// The nodes a WatchFor::kReturns watch checks: `returning` (indices in `spec`) and, as witnesses
// (NodeSpec::witness: in the peer test, never judged), the first kReturnWitnesses of `in_job`
// that are not returning, so that a node which cannot connect with the job's nodes where the
// collectives run does not come back (it would hang the init of the attempt or round it joins).
ClusterSpec ReturnWatchNodes(const ClusterSpec& spec, const std::vector<int>& returning,
                             const std::vector<int>& in_job);

class HealthWatch {
 public:
  // `checked`: the nodes passed the same checks just before the attempt started, so any finding
  // is news. Otherwise the first round is only a baseline: a node is reported when it is unfit
  // and it was fit in the baseline, or unfit for another reason (a second Xid).
  // With WatchFor::kReturns, `checked` only says that the first round waits for the interval.
  HealthWatch(NodeHealthCheck check, ClusterSpec nodes, double interval_s, bool checked,
              WatchFor watch_for = WatchFor::kUnfit);
  ~HealthWatch();  // stops the thread; a round under way is cut short
  HealthWatch(const HealthWatch&) = delete;
  HealthWatch& operator=(const HealthWatch&) = delete;

  // The first node found unfit, once; nullopt before (and after) that.
  std::optional<UnfitNode> Take();
  // The warnings found since the last call (a flaky link), oldest first; each comes once.
  std::vector<NodeWarning> TakeWarnings();
  // WatchFor::kReturns: the first node fit kReturnRounds rounds in a row, once.
  std::optional<std::string> TakeReturned();
  int rounds() const;

 private:
  void Loop();
  // One round's findings; true when the watch has found what it looks for.
  bool JudgeUnfit(NodeHealthFindings& found, double after_s);
  bool JudgeReturns(const NodeHealthFindings& found);

  NodeHealthCheck check_;
  ClusterSpec nodes_;
  double interval_s_;
  bool checked_;
  WatchFor watch_for_;
  std::map<std::string, std::string> baseline_;  // kUnfit without `checked`: the first round's
  bool have_baseline_ = false;
  std::map<std::string, int> fit_rounds_;  // kReturns: rounds in a row each node passed
  std::optional<std::string> returned_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<bool> stop_{false};
  std::optional<UnfitNode> found_;
  std::vector<NodeWarning> warnings_;
  bool taken_ = false;
  int rounds_ = 0;
  std::thread thread_;
};

}  // namespace dtrain
