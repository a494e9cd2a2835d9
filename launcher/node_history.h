// Nodes that earlier jobs of a log dir quarantined (a node lost, unreachable, unfit, a straggler,
// blamed for failed attempts): read back from their job.json, so that the next launch holds such
// a node back as a spare while a node nobody quarantined can take its place. A scheduler does the
// same with a node a job failed on (Slurm drains it, Horovod's elastic driver blacklists it for
// a cooldown); on a cluster of SSH nodes dtrain is the one that picks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/job_record.h"
#include "launcher/slurm/slurm_allocation.h"

namespace dtrain {

// A node quarantined again is held back longer, as Horovod's elastic driver doubles a host's
// cooldown each time it blacklists it: the hold-back window, doubled for each job after the first
// that quarantined the node within the last kHoldBackGrowth windows, kHoldBackGrowth windows at
// most (a day, two, four, eight with the default).
constexpr int kHoldBackGrowth = 8;

// Why and when an earlier job quarantined a node.
struct PastQuarantine {
  std::string job;
  std::string why;
  int64_t when_us = 0;  // the job's end (its record's last write while it runs)
  int jobs = 1;         // the jobs that quarantined it within kHoldBackGrowth windows
  double window_s = 0;  // the hold-back window (--hold-back, job.hold_back)
  double held_s = 0;    // how long it is held back after `when_us`: window_s grown (above)
};

// How long a node that `jobs` jobs quarantined is held back after the newest, with a hold-back
// window of `window_s`: window_s, doubled for each job after the first, kHoldBackGrowth windows
// at most.
double GrownHoldBack(double window_s, int jobs);

// The newest quarantine of each node, by node name, among the jobs in `log_dir` that ended (or,
// still running, last wrote their record) within its hold-back before `now_us`: `within_s`
// seconds, grown by the jobs that quarantined it within kHoldBackGrowth windows (GrownHoldBack);
// Slurm jobs are left to RecentlyQuarantinedSlurmNodes. A folder without a readable job.json is
// passed over.
std::map<std::string, PastQuarantine> RecentQuarantines(const std::string& log_dir, double within_s,
                                                        int64_t now_us);

// The same for the Slurm nodes (machines) that the quarantined nodes of `transport: slurm` jobs
// ran on, by Slurm node name.
std::map<std::string, PastQuarantine> RecentlyQuarantinedSlurmNodes(const std::string& log_dir,
                                                                    double within_s,
                                                                    int64_t now_us);

// A node held back, and the spare that runs in its place ("" when no spare could).
struct HeldBack {
  std::string host;
  std::string spare;
  PastQuarantine past;
};

// Marks each non-spare node of `nodes` that `recent` names a spare, in the cluster file's order,
// while a spare it does not name is left to take its place (that spare is no longer one); a node
// with no such spare stays in the job. Returns what it did, a node at a time.
std::vector<HeldBack> HoldBackRecentlyQuarantined(
    std::vector<NodeSpec>& nodes, const std::map<std::string, PastQuarantine>& recent);

// What --hold-back does to one launch.
struct HoldBackPlan {
  std::vector<HeldBack> ssh_nodes;                    // nodes held back as spares, as above
  std::map<std::string, PastQuarantine> slurm_nodes;  // Slurm nodes to leave out, by name
  std::vector<std::string> SlurmNodeNames() const;
};

// --hold-back S, from the jobs in `log_dir` that quarantined a node within `within_s` seconds.
// SSH nodes (a node's name is its machine): such nodes held back as above. Slurm (a node's name
// labels whichever machine an allocation gives): the Slurm nodes they ran on, for the allocation
// to leave out (SlurmJobIdentity::avoid). Local jobs: nothing.
HoldBackPlan PlanHoldBack(ClusterSpec& spec, const std::string& log_dir, double within_s,
                          int64_t now_us);

// A hold-back window in words: "a day" (the default), else "40 s", "12 min", "3 h", "2 days".
std::string HoldBackSpan(double seconds);

// "job cut quarantined it 12 min ago: WHY"; a node quarantined by several jobs: "job cut
// quarantined it 12 min ago, the 3rd job to do so within 8 days (held back 4 days, not a day):
// WHY".
std::string DescribePastQuarantine(const PastQuarantine& past, int64_t now_us);

// "node node1 held back as a spare (node2 runs in its place): job J quarantined it 12 min ago:
// WHY", or, without a spare, "node node1 runs though job J quarantined it ...".
std::string DescribeHeldBack(const HeldBack& held, int64_t now_us);

// What became of a Slurm node an earlier job quarantined, once the job is placed: "Slurm node
// node2 left out of this job (sbatch --exclude): job J quarantined it 12 min ago: WHY", or
// "Slurm node node2 runs in this job though job J quarantined it ...; ...". `used`: a node of
// the job runs there; `excluded`: the batch job went in without it; `in_allocation`: the
// caller's allocation holds it. "" when it was never a candidate (outside the allocation).
std::string DescribeSlurmHoldBack(const std::string& machine, const PastQuarantine& past, bool used,
                                  bool excluded, bool in_allocation, int64_t now_us);

// A Slurm node an earlier job quarantined that Slurm no longer has (renamed or removed since):
// "Slurm node node9 is not left out of this job: Slurm has no such node now (sinfo), though job J
// quarantined it 12 min ago: WHY".
std::string DescribeSlurmNodeGone(const std::string& machine, const PastQuarantine& past,
                                  int64_t now_us);

// Says what became of each node of `plan` on the console ("dtrain: node node1 held back ...")
// and keeps it in the job's record (an event of kind held_back). `placed`: the job on the
// machines it runs on, `allocation`: the Slurm job that holds them, if any.
void SayHeldBack(const HoldBackPlan& plan, const ClusterSpec& placed,
                 const SlurmAllocation& allocation, JobRecord& record);

// "1st", "2nd", "3rd", "4th", "11th", "22nd".
std::string Ordinal(int n);

}  // namespace dtrain
