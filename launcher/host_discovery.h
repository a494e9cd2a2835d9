// horovodrun's --host-discovery-script for an elastic Horovod job: a program dtrain runs on this
// machine (`sh -c SCRIPT`) at the start and then every second, which prints the hosts that are
// available now, one per line, "host" or "host:slots" (horovod/runner/elastic/discovery.py's
// HostDiscoveryScript). dtrain's nodes stay those of the cluster (-c FILE, -H, --hostfile): the
// script says which of them may run ranks now. A host is a node when it is the node's name or
// its address; a host that is no node is said once and left alone. Each run has a deadline (a
// script that never answers is a failed run, not a hung launch).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

// How long one run of the script may take, and how often it runs (horovodrun's
// DISCOVER_HOSTS_FREQUENCY_SECS).
constexpr int kDiscoveryTimeoutS = 10;
constexpr double kDiscoveryIntervalS = 1.0;

// The script's output as horovodrun reads it: host -> slots, each line "host" (slots:
// `default_slots`, 0 when not given) or "host:slots"; empty lines are skipped (a script prints
// nothing while no host is ready), a line seen twice counts once. nullopt, with `error` naming the
// line, when a line is not "host[:slots]" with slots a whole number of at least 1.
std::optional<std::map<std::string, int>> ParseDiscoveredHosts(const std::string& text,
                                                               int default_slots,
                                                               std::string& error);

// One run of the script.
struct DiscoveryRun {
  bool ok = false;
  std::map<std::string, int> hosts;  // as printed (ParseDiscoveredHosts)
  std::string error;                 // why the run failed: exit status and stderr, or the line
  int64_t seq = 0;                   // 1 for the first run, then counting up
};

// The nodes of `spec` the run names (NodeSpec::host of each), and the hosts it names that are no
// node of `spec`.
struct DiscoveredNodes {
  std::set<std::string> nodes;
  std::vector<std::string> unknown;
};
DiscoveredNodes MatchDiscoveredHosts(const ClusterSpec& spec,
                                     const std::map<std::string, int>& hosts);
// What to say of hosts the script lists that are no node: what dtrain does and how to use them.
// `first_listing`: the job's nodes are the hosts the script listed first (no cluster file, -H or
// --hostfile named), so a host it lists later is new to the job.
std::string UnknownHostsWarning(const std::vector<std::string>& hosts, bool first_listing = false);

class HostDiscovery;

// The start of an elastic job with a discovery script, as horovodrun's driver starts one: the
// script runs every kDiscoveryIntervalS until the nodes of `spec` it lists (spares aside) hold at
// least `ranks` ranks (their slots), said on the console while it waits; returns those nodes.
// Throws Error when its first run fails (horovodrun fails the job at once: a misconfiguration) or
// when `timeout_s` passes first (--elastic-timeout), naming what it listed last and what to do.
std::set<std::string> WaitForDiscoveredNodes(HostDiscovery& discovery, const ClusterSpec& spec,
                                             int ranks, int timeout_s);

// For a launch with no cluster file, -H or --hostfile: what the script lists, waited for as above
// (a first host), as -H's "host:slots,..." (slots 1 where neither the line nor --slots-per-host
// gives them). The hosts it lists later are said as new to the job (UnknownHostsWarning).
std::string WaitForDiscoveredHostList(HostDiscovery& discovery, int timeout_s);

// The script, run now (RunOnce) or every kDiscoveryIntervalS on a thread of its own (Start).
class HostDiscovery {
 public:
  HostDiscovery(std::string script, int default_slots, int timeout_s = kDiscoveryTimeoutS);
  ~HostDiscovery();  // stops the thread (a run under way is waited for, at most its deadline)
  HostDiscovery(const HostDiscovery&) = delete;
  HostDiscovery& operator=(const HostDiscovery&) = delete;

  // Runs the script once on this thread; the result is also the latest.
  DiscoveryRun RunOnce();
  // From now on the script runs every kDiscoveryIntervalS until this is destroyed.
  void Start();
  // The last run's result (seq 0: none yet).
  DiscoveryRun Latest() const;
  // The last run that succeeded (seq 0: none yet).
  DiscoveryRun LastGood() const;

  const std::string& script() const { return script_; }
  // Says UnknownHostsWarning of the hosts in `unknown` not said before (once per host per job).
  void SayUnknown(const std::vector<std::string>& unknown);
  // The job's nodes are the hosts the script listed first (WaitForDiscoveredHostList).
  void NodesAreTheFirstListing();

 private:
  DiscoveryRun Run();
  void Loop();

  const std::string script_;
  const int default_slots_;
  const int timeout_s_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  int64_t runs_ = 0;
  DiscoveryRun latest_;
  DiscoveryRun last_good_;
  std::set<std::string> unknown_said_;
  bool first_listing_ = false;  // the job's nodes are the hosts of the first listing
  std::thread thread_;
};

}  // namespace dtrain
