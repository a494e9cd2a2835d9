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
  if (job_.settings.cooldown_min_s > 0 || job_.discovery) {
    supervise.elastic_rejoins = [this](const std::map<int, ExitStatus>& ended,
                                       HealthWatch*& watch) { return Rejoins(ended, watch); };
  }
  if (job_.discovery) {
    supervise.elastic_removals = [this](HealthWatch*& watch) { return Removals(watch); };
    for (const std::string& host : never_started_) rounds.Absent(host);
    if (!never_started_.empty()) WatchTheStaying(supervise.health_watch);
    job_.discovery->Start();  // from now on, every second
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

std::set<std::string> ElasticLeaves::Absent() {
  if (!job_.discovery) return {};
  const std::set<std::string> listed = Listed();
  int ranks = 0;  // of the listed nodes, in the cluster's order, up to --max-np
  for (const NodeSpec& node : spec_.nodes) {
    const int on = static_cast<int>(RanksOn(node.host).size());
    if (listed.count(node.host) &&
        (job_.settings.max_np <= 0 || ranks + on <= job_.settings.max_np)) {
      ranks += on;
      continue;
    }
    never_started_.insert(node.host);
    unlisted_.insert(node.host);
    left_.insert(node.host);
  }
  return never_started_;
}

// dtrain's ranks of node `host`, in plan order.
std::vector<int> ElasticLeaves::RanksOn(const std::string& host) const {
  std::vector<int> ranks;
  for (const RankSlot& slot : job_.record.plan.ranks) {
    if (slot.host == host) ranks.push_back(slot.rank);
  }
  return ranks;
}

// The nodes of the attempt the script lists in its last good run; a host that is no node is said
// once.
std::set<std::string> ElasticLeaves::Listed() {
  const DiscoveryRun run = job_.discovery->LastGood();
  const DiscoveredNodes found = MatchDiscoveredHosts(job_.spec, run.hosts);
  job_.discovery->SayUnknown(found.unknown);
  std::set<std::string> listed;
  for (const NodeSpec& node : spec_.nodes) {
    if (found.nodes.count(node.host)) listed.insert(node.host);
  }
  return listed;
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
    const bool first = std::all_of(change.joined_hosts.begin(), change.joined_hosts.end(),
                                   [&](const std::string& h) { return first_join_.count(h); });
    detail += fmt::format("node(s) {} joined the elastic Horovod job{} (rank(s) {}); ",
                          fmt::join(change.joined_hosts, ","), first ? "" : " again",
                          RankList(change.joined_ranks));
    for (const std::string& h : change.joined_hosts) first_join_.erase(h);
  }
  if (!change.removed_hosts.empty()) {
    detail += fmt::format(
        "node(s) {} left the elastic Horovod job, no longer listed by --host-discovery-script "
        "(rank(s) {}); ",
        fmt::join(change.removed_hosts, ","), RankList(change.removed_ranks));
  }
  if (change.waiting) {
    detail += fmt::format(
        "{} rank(s) remain, fewer than --min-np {}: they wait up to {} s for nodes to join "
        "(--elastic-timeout){}",
        change.size, job_.settings.min_np, change.wait.count(),
        job_.discovery ? ", as --host-discovery-script lists them" : ", after their cooldown");
  } else {
    detail += fmt::format("{} rank(s) go on in round {}", change.size, change.round);
  }
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

// Whether node `host`, out of the job, may come back now: a node the script stopped listing (or
// never listed) at once, one that left for a failure after its cooldown; with the script, only
// while it lists the node.
bool ElasticLeaves::MayReturn(const std::string& host,
                              std::chrono::steady_clock::time_point now) const {
  auto after = back_after_.find(host);
  if (after != back_after_.end()) return now >= after->second;
  return unlisted_.count(host) > 0;
}

// The node that comes back now, if any: it may (MayReturn), every rank it had has ended, the
// rounds can take it (--max-np, --reset-limit), and it passed the health checks kReturnRounds
// rounds in a row (with the health watch on). Its ranks join the rounds; the supervisor starts
// them. Returns its index in the attempt, or -1.
int ElasticLeaves::Rejoins(const std::map<int, ExitStatus>& ended, HealthWatch*& watch) {
  const auto now = std::chrono::steady_clock::now();
  std::set<std::string> listed;
  if (job_.discovery) listed = Listed();
  std::set<std::string> ready;
  for (const std::string& host : left_) {
    if (!MayReturn(host, now) || (job_.discovery && !listed.count(host))) continue;
    const std::vector<int> ranks = RanksOn(host);
    const bool all_ended =
        never_started_.count(host) ||
        std::all_of(ranks.begin(), ranks.end(), [&](int rank) { return ended.count(rank); });
    if (!all_ended) continue;
    std::string refused = rounds_->WhyNotJoin(host);
    if (refused.empty() && job_.dir_sync) {
      // --sync: it joins once the launch directory is there (copied on a thread of its own).
      std::string why;
      const LaunchDirSync::State synced = job_.dir_sync->Poll(job_.spec, host, why);
      if (synced == LaunchDirSync::State::kBusy) continue;
      if (synced == LaunchDirSync::State::kFailed) {
        refused = fmt::format(
            "the launch directory could not be copied to it (--sync): {}; "
            "tried again every {:g} s",
            why, LaunchDirSync::kRetryS);
      }
    }
    if (refused.empty()) {
      ready.insert(host);
      refused_said_.erase(host);
    } else if (refused_said_[host] != refused) {
      refused_said_[host] = refused;
      std::fprintf(stderr, "dtrain: node %s stays out of the elastic Horovod job for now: %s\n",
                   host.c_str(), refused.c_str());
    }
  }
  std::string host;
  if (job_.settings.health_watch_s > 0) {
    // The nodes that would join are tested with some of the job's (ReturnWatchNodes).
    std::vector<int> in_job;
    for (const NodeSpec& node : spec_.nodes) {
      if (!left_.count(node.host)) in_job.push_back(NodeIndex(job_.spec, node.host));
    }
    if (in_job.size() > kReturnWitnesses) in_job.resize(kReturnWitnesses);
    if (ready != returning_ || in_job != return_witnesses_) {
      returning_ = ready;
      return_witnesses_ = in_job;
      return_watch_.reset();
      std::vector<int> indices;
      for (const std::string& h : ready) indices.push_back(NodeIndex(job_.spec, h));
      if (!indices.empty()) {
        return_watch_ = std::make_unique<HealthWatch>(
            job_.options.check_nodes, ReturnWatchNodes(job_.spec, indices, in_job),
            job_.settings.health_watch_s, /*checked=*/false, WatchFor::kReturns);
      }
    }
    if (!return_watch_) return -1;
    std::optional<std::string> fit = return_watch_->TakeReturned();
    if (!fit) return -1;
    host = *fit;
    returning_.clear();  // a new watch for those still out, next time
    return_watch_.reset();
    if (!ready.count(host)) return -1;  // no longer listed while it was checked
  } else {
    if (ready.empty()) return -1;
    host = *ready.begin();
  }
  const std::string refused = rounds_->Rejoin(host);
  if (!refused.empty()) {
    std::fprintf(stderr, "dtrain: node %s stays out of the elastic Horovod job: %s\n", host.c_str(),
                 refused.c_str());
    back_after_.erase(host);
    return -1;
  }
  const bool from_cooldown = back_after_.count(host) > 0;
  const bool first_time = never_started_.count(host) > 0;
  back_after_.erase(host);
  unlisted_.erase(host);
  never_started_.erase(host);
  if (first_time) first_join_.insert(host);
  left_.erase(host);
  left_why_.erase(host);
  TakeBack(job_, NodeIndex(job_.spec, host));
  const std::vector<int> ranks = RanksOn(host);
  const std::string checks =
      job_.settings.health_watch_s > 0
          ? fmt::format("passed the health checks {} rounds in a row", kReturnRounds)
          : std::string("is back");
  const std::string detail =
      from_cooldown
          ? fmt::format(
                "node {} {} after its cooldown of {:.1f} s; it joins the elastic Horovod "
                "job again with rank(s) {}",
                host, checks, cooldown_s_[host], RankList(ranks))
          : fmt::format(
                "node {} is listed by --host-discovery-script{}{}; it joins the elastic "
                "Horovod job {}with rank(s) {}",
                host, first_time ? "" : " again",
                job_.settings.health_watch_s > 0
                    ? fmt::format(" and passed the health checks {} rounds in a row", kReturnRounds)
                    : "",
                first_time ? "" : "again ", RankList(ranks));
  std::fprintf(stderr, "dtrain: %s\n", detail.c_str());
  job_.record.events.push_back({WallMicros(), "node_returned", detail, ""});
  WriteJobRecord(job_.folder.job_dir, job_.record);
  WatchTheStaying(watch);
  return NodeIndex(spec_, host);
}

// --host-discovery-script: the nodes in the job it no longer lists are taken out at the next
// round (their ranks are told so by the rendezvous and end); said once each. A run of the script
// that failed changes nothing (its last good run stands), said once until it works again.
std::vector<int> ElasticLeaves::Removals(HealthWatch*& watch) {
  const DiscoveryRun latest = job_.discovery->Latest();
  if (!latest.ok && latest.seq > 0 && latest.error != discovery_error_said_) {
    discovery_error_said_ = latest.error;
    std::fprintf(stderr,
                 "dtrain: warning: --host-discovery-script failed: %s; dtrain keeps the hosts it "
                 "listed last and runs it again every %g s\n",
                 latest.error.c_str(), kDiscoveryIntervalS);
  } else if (latest.ok && !discovery_error_said_.empty()) {
    discovery_error_said_.clear();
    std::fprintf(stderr, "dtrain: --host-discovery-script works again\n");
  }
  const std::set<std::string> listed = Listed();
  std::vector<int> nodes;
  for (const NodeSpec& node : spec_.nodes) {
    if (left_.count(node.host) || listed.count(node.host)) continue;
    if (!rounds_->Remove(node.host).empty()) continue;
    left_.insert(node.host);
    unlisted_.insert(node.host);
    const std::string detail = fmt::format(
        "node {} is no longer listed by --host-discovery-script; its rank(s) {} leave the "
        "elastic Horovod job when the others next reset (at their next state.commit())",
        node.host, RankList(RanksOn(node.host)));
    std::fprintf(stderr, "dtrain: %s\n", detail.c_str());
    job_.record.events.push_back({WallMicros(), "elastic_round", detail, ""});
    nodes.push_back(NodeIndex(spec_, node.host));
  }
  if (!nodes.empty()) {
    WriteJobRecord(job_.folder.job_dir, job_.record);
    WatchTheStaying(watch);
  }
  return nodes;
}

}  // namespace dtrain
