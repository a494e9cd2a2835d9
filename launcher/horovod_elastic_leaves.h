// The nodes that leave an elastic Horovod job while one attempt runs (--min-np): a node whose
// rank failed or was lost (settled by the rounds, horovod_elastic_rounds.h), a node the health
// watch found unfit, or, under --on-stall stop, the node of a rank the others wait for. Each is
// said on the console and in job.json (event elastic_round), quarantined, and the health watch
// goes on with the nodes still in the job. With --blacklist-cooldown-range, a node that left may
// come back once its cooldown is over (elastic_cooldown.h) and, with the health watch on, once it
// passed the fast health checks kReturnRounds rounds in a row: it joins the job's next round
// (HorovodElasticRounds::Rejoin) and is watched again. With --host-discovery-script
// (host_discovery.h), only nodes the script lists take part: a node it does not list at the start
// is absent from the first round, one it stops listing is taken out at the next round
// (HorovodElasticRounds::Remove), and one it lists (again) joins as a node back from its
// cooldown does; a node that left for a failure also waits out its cooldown. Wires the
// supervisor's elastic callbacks.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/health_watch.h"
#include "launcher/job_attempt.h"
#include "launcher/job_supervisor.h"

namespace dtrain {

class ElasticLeaves {
 public:
  // `spec`: the attempt's nodes; `health_watch`: the attempt's watch (null: none), replaced by
  // one on the nodes still in the job each time a node leaves while its ranks run.
  ElasticLeaves(Job& job, const ClusterSpec& spec, std::unique_ptr<HealthWatch>& health_watch);

  // Sets supervise's on_elastic_change, unfit_leaves, stall_leaves, elastic_rejoins and
  // elastic_removals; this must outlive it, and `rounds` this.
  void Wire(SupervisorOptions& supervise, HorovodElasticRounds& rounds);

  // The nodes of the attempt the discovery script does not list at its start: their ranks are
  // absent from the first round (HorovodElasticRounds::Absent) and not started. Before Wire.
  std::set<std::string> Absent();

 private:
  void SayRound(const ElasticRoundChange& change, const std::map<int, ExitStatus>& statuses);
  int Leave(const std::string& host, const std::string& why, const std::string& said,
            const std::string& quarantine_why);
  int Unfit(const UnfitNode& unfit, HealthWatch*& watch);
  std::vector<int> Stalled(const StallReport& stall, HealthWatch*& watch);
  void WatchTheStaying(HealthWatch*& watch);
  void StartCooldown(const std::string& host);
  int Rejoins(const std::map<int, ExitStatus>& ended, HealthWatch*& watch);
  std::vector<int> Removals(HealthWatch*& watch);
  std::set<std::string> Listed();  // the nodes the script lists now (unknown hosts said once)
  std::vector<int> RanksOn(const std::string& host) const;
  bool MayReturn(const std::string& host, std::chrono::steady_clock::time_point now) const;

  Job& job_;
  const ClusterSpec& spec_;
  std::unique_ptr<HealthWatch>& health_watch_;
  std::set<std::string> left_;                   // nodes that left the job
  std::map<std::string, std::string> left_why_;  // ... those that left while their ranks ran
  HorovodElasticRounds* rounds_ = nullptr;
  // --blacklist-cooldown-range: how often each node left, and when it may come back.
  std::map<std::string, int> leaves_;
  std::map<std::string, std::chrono::steady_clock::time_point> back_after_;
  std::map<std::string, double> cooldown_s_;
  std::set<std::string> returning_;            // the nodes return_watch_ follows
  std::unique_ptr<HealthWatch> return_watch_;  // ... through the health checks
  std::vector<int> return_witnesses_;          // ... with these nodes of the job in its peer test
  // --host-discovery-script: the nodes out of the job because it does not list them (absent at
  // the start or taken out), those never started, and what was said once.
  std::set<std::string> unlisted_;
  std::set<std::string> never_started_;
  std::set<std::string> first_join_;  // joining for the first time (never started before)
  std::map<std::string, std::string> refused_said_;
  std::string discovery_error_said_;
};

}  // namespace dtrain
