// Why a node left, said once: a lost node's ranks all carry the loss, and a node that left while
// its ranks ran (unfit, or with a stalled rank) is said by its reason, not by its ranks' SIGTERM.
#include "launcher/horovod_elastic_leaves.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "launcher/elastic_cooldown.h"
#include "launcher/hangs/stall_report.h"
#include "launcher/job_attempt.h"
#include "launcher/node_health_checks.h"
#include "launcher/node_history.h"

namespace dtrain {

ElasticLeaves::ElasticLeaves(Job& job, const ClusterSpec& spec,
                             std::unique_ptr<HealthWatch>& health_watch)
    : job_(job), spec_(spec), health_watch_(health_watch) {}

void ElasticLeaves::Wire(SupervisorOptions& supervise, HorovodElasticRounds& rounds) {
  rounds_ = &rounds;
  if (job_.settings.cooldown_min_s > 0) {
    supervise.elastic_rejoins = [this](const std::map<int, ExitStatus>& ended,
                                       HealthWatch*& watch) { return Rejoins(ended, watch); };
  }
  supervise.on_elastic_change = [this](const ElasticRoundChange& change,
                                       const std::map<int, ExitStatus>& statuses) {
    SayRound(change, statuses);
  };
  supervise.unfit_leaves = [this](const UnfitNode& unfit, HealthWatch*& watch) {
    return Unfit(unfit, watch);
  };
  supervise.stall_leaves = [this](const StallReport& stall, HealthWatch*& watch) {
    return Stalled(stall, watch);
  };
}

// A new round: "node(s) node1 left the elastic Horovod job: rank 1: killed by SIGKILL; 2 rank(s)
// go on in round 2", on the console and in the job's record; the nodes that left are quarantined.
void ElasticLeaves::SayRound(const ElasticRoundChange& change,
                             const std::map<int, ExitStatus>& statuses) {
  std::vector<std::string> why;
  for (const std::string& host : change.left_hosts) {
    if (auto w = left_why_.find(host); w != left_why_.end()) why.push_back(w->second);
  }
  for (int rank : change.failed_ranks) {
    auto status = statuses.find(rank);
    if (status == statuses.end() || left_why_.count(job_.record.plan.ranks.at(rank).host)) continue;
    why.push_back(status->second.lost
                      ? status->second.error
                      : fmt::format("rank {}: {}", rank, status->second.Describe()));
  }
  std::sort(why.begin(), why.end());
  why.erase(std::unique(why.begin(), why.end()), why.end());  // a lost node's ranks say it alike
  std::vector<int> with;  // ranks that did not fail but leave with their node
  for (int rank : change.left_ranks) {
    if (std::find(change.failed_ranks.begin(), change.failed_ranks.end(), rank) ==
        change.failed_ranks.end())
      with.push_back(rank);
  }
  std::string detail;
  if (!change.left_hosts.empty()) {
    detail = fmt::format(
        "node(s) {} left the elastic Horovod job: {}{}; ", fmt::join(change.left_hosts, ","),
        fmt::join(why, "; "),
        with.empty() ? "" : fmt::format(" (rank(s) {} leave with it)", fmt::join(with, ",")));
  }
  if (!change.joined_hosts.empty()) {
    detail += fmt::format("node(s) {} joined the elastic Horovod job again (rank(s) {}); ",
                          fmt::join(change.joined_hosts, ","), RankList(change.joined_ranks));
  }
  detail += fmt::format("{} rank(s) go on in round {}", change.size, change.round);
  std::fprintf(stderr, "dtrain: %s\n", detail.c_str());
  job_.record.events.push_back({WallMicros(), "elastic_round", detail, ""});
  for (const std::string& host : change.left_hosts) {
    const int index = NodeIndex(job_.spec, host);
    if (index >= 0 && !left_why_.count(host)) {  // one that left while running was quarantined
      Quarantine(job_, index,
                 fmt::format("a rank on it failed in round {} of the elastic Horovod job",
                             change.round - 1),
                 /*may_return=*/job_.settings.cooldown_min_s > 0);
    }
  }
  left_.insert(change.left_hosts.begin(), change.left_hosts.end());
  for (const std::string& host : change.left_hosts) StartCooldown(host);
  WriteJobRecord(job_.folder.job_dir, job_.record);
}

// A node leaves while its ranks run, for `why` ("node b failed the health watch: ..."), said on
// the console as `said`; its index in the attempt, -1 if it left already.
int ElasticLeaves::Leave(const std::string& host, const std::string& why, const std::string& said,
                         const std::string& quarantine_why) {
  const int node = NodeIndex(spec_, host);
  if (node < 0 || !left_.insert(host).second) return -1;
  left_why_[host] = why;
  std::fprintf(stderr, "dtrain: %s; its rank(s) leave the elastic Horovod job\n", said.c_str());
  job_.record.events.push_back({WallMicros(), "elastic_round", why, ""});
  Quarantine(job_, NodeIndex(job_.spec, host), quarantine_why,
             /*may_return=*/job_.settings.cooldown_min_s > 0);
  return node;
}

int ElasticLeaves::Unfit(const UnfitNode& unfit, HealthWatch*& watch) {
  const int node =
      Leave(unfit.host, "node " + unfit.host + " failed the health watch: " + unfit.why,
            fmt::format("node {} failed the health watch {:.1f} s into the attempt: {}", unfit.host,
                        unfit.found_after_s, unfit.why),
            "failed the health watch during the run: " + unfit.why);
  WatchTheStaying(watch);
  return node;
}

// The nodes of the ranks the others wait for leave, unless no node would be left.
std::vector<int> ElasticLeaves::Stalled(const StallReport& stall, HealthWatch*& watch) {
  std::map<std::string, std::vector<int>> culprits;  // node -> its ranks waited for
  for (int rank : stall.culprits) culprits[job_.record.plan.ranks.at(rank).host].push_back(rank);
  std::vector<int> nodes;
  const bool none_left = std::all_of(spec_.nodes.begin(), spec_.nodes.end(), [&](auto& n) {
    return left_.count(n.host) || culprits.count(n.host);
  });
  if (none_left) return nodes;
  for (const auto& [host, ranks] : culprits) {
    const std::string why = fmt::format("rank(s) {} on node {} stalled: no progress for {:g} s",
                                        RankList(ranks), host, job_.settings.stall_timeout_s);
    const int node = Leave(host, why, why + " (--on-stall stop)",
                           "a rank on it stalled in the elastic Horovod job");
    if (node >= 0) nodes.push_back(node);
  }
  WatchTheStaying(watch);
  return nodes;
}

// The health watch (if any) goes on with the nodes still in the job.
void ElasticLeaves::WatchTheStaying(HealthWatch*& watch) {
  if (!health_watch_) return;
  ClusterSpec staying = spec_;
  staying.nodes.clear();
  for (const NodeSpec& n : spec_.nodes) {
    if (!left_.count(n.host)) staying.nodes.push_back(n);
  }
  health_watch_.reset();
  if (!staying.nodes.empty()) {
    health_watch_ = std::make_unique<HealthWatch>(job_.options.check_nodes, staying,
                                                  job_.settings.health_watch_s, /*checked=*/true);
  }
  watch = health_watch_.get();
}

// --blacklist-cooldown-range: the node may come back after a cooldown that doubles each time it
// leaves, said on the console.
void ElasticLeaves::StartCooldown(const std::string& host) {
  if (job_.settings.cooldown_min_s <= 0) return;
  static std::mt19937_64 random{std::random_device{}()};
  const int count = ++leaves_[host];
  const double u = std::uniform_real_distribution<double>(0, 1)(random);
  const double cooldown_s =
      CooldownSeconds(job_.settings.cooldown_min_s, job_.settings.cooldown_max_s, count, u);
  cooldown_s_[host] = cooldown_s;
  back_after_[host] = std::chrono::steady_clock::now() +
                      std::chrono::milliseconds(static_cast<long long>(cooldown_s * 1000));
  std::fprintf(stderr,
               "dtrain: node %s may join the elastic Horovod job again after a cooldown of %.1f s "
               "(--blacklist-cooldown-range %g %g, the %s time it left)%s\n",
               host.c_str(), cooldown_s, job_.settings.cooldown_min_s, job_.settings.cooldown_max_s,
               Ordinal(count).c_str(),
               job_.settings.health_watch_s > 0
                   ? fmt::format(" and {} health checks in a row", kReturnRounds).c_str()
                   : "");
}

// The node that comes back now, if any: its cooldown is over, every rank it had has ended, and
// it passed the health checks kReturnRounds rounds in a row (with the health watch on). Its
// ranks join the rounds; the supervisor starts them. Returns its index in the attempt, or -1.
int ElasticLeaves::Rejoins(const std::map<int, ExitStatus>& ended, HealthWatch*& watch) {
  const auto now = std::chrono::steady_clock::now();
  std::set<std::string> ready;
  for (const auto& [host, after] : back_after_) {
    if (now < after || !left_.count(host)) continue;
    bool all_ended = true;
    for (const RankSlot& slot : job_.record.plan.ranks) {
      if (slot.host == host && !ended.count(slot.rank)) all_ended = false;
    }
    if (all_ended) ready.insert(host);
  }
  std::string host;
  if (job_.settings.health_watch_s > 0) {
    if (ready != returning_) {
      returning_ = ready;
      return_watch_.reset();
      std::vector<int> indices;
      for (const std::string& h : ready) indices.push_back(NodeIndex(job_.spec, h));
      if (!indices.empty()) {
        return_watch_ = std::make_unique<HealthWatch>(
            job_.options.check_nodes, AttemptSpec(job_.spec, indices), job_.settings.health_watch_s,
            /*checked=*/false, WatchFor::kReturns);
      }
    }
    if (!return_watch_) return -1;
    std::optional<std::string> fit = return_watch_->TakeReturned();
    if (!fit) return -1;
    host = *fit;
    returning_.clear();  // a new watch for those still out, next time
    return_watch_.reset();
  } else {
    if (ready.empty()) return -1;
    host = *ready.begin();
  }
  back_after_.erase(host);
  const std::string refused = rounds_->Rejoin(host);
  if (!refused.empty()) {
    std::fprintf(stderr, "dtrain: node %s stays out of the elastic Horovod job: %s\n", host.c_str(),
                 refused.c_str());
    return -1;
  }
  left_.erase(host);
  left_why_.erase(host);
  const int index = NodeIndex(job_.spec, host);
  job_.pool.Return(index);
  job_.record.quarantined.erase(host);
  job_.lost_nodes.erase(host);
  std::vector<int> ranks;
  for (const RankSlot& slot : job_.record.plan.ranks) {
    if (slot.host == host) ranks.push_back(slot.rank);
  }
  const std::string detail = fmt::format(
      "node {} {} after its cooldown of {:.1f} s; it joins the elastic Horovod job again with "
      "rank(s) {}",
      host,
      job_.settings.health_watch_s > 0
          ? fmt::format("passed the health checks {} rounds in a row", kReturnRounds)
          : std::string("is back"),
      cooldown_s_[host], RankList(ranks));
  std::fprintf(stderr, "dtrain: %s\n", detail.c_str());
  job_.record.events.push_back({WallMicros(), "node_returned", detail, ""});
  WriteJobRecord(job_.folder.job_dir, job_.record);
  WatchTheStaying(watch);
  return NodeIndex(spec_, host);
}

}  // namespace dtrain
