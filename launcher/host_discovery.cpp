// The script's runs: on the caller's thread (the start) or on a thread of its own (the job).
#include "launcher/host_discovery.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <sstream>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/short_command.h"

namespace dtrain {
namespace {

std::string Trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::optional<int> WholeNumber(const std::string& text) {
  if (text.empty() || text.size() > 6) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return std::stoi(text);
}

}  // namespace

std::optional<std::map<std::string, int>> ParseDiscoveredHosts(const std::string& text,
                                                               int default_slots,
                                                               std::string& error) {
  std::map<std::string, int> hosts;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    line = Trimmed(line);
    if (line.empty()) continue;
    std::string host = line;
    int slots = default_slots;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      host = Trimmed(line.substr(0, colon));
      const std::optional<int> n = WholeNumber(Trimmed(line.substr(colon + 1)));
      if (!n || *n < 1) {
        error = fmt::format(
            "line {} \"{}\" is not HOST or HOST:SLOTS with SLOTS a whole number "
            "of at least 1",
            number, line.substr(0, 80));
        return std::nullopt;
      }
      slots = *n;
    }
    if (host.empty() || host.find_first_of(" \t") != std::string::npos) {
      error = fmt::format("line {} \"{}\" names no host", number, line.substr(0, 80));
      return std::nullopt;
    }
    hosts[host] = slots;
  }
  return hosts;
}

DiscoveredNodes MatchDiscoveredHosts(const ClusterSpec& spec,
                                     const std::map<std::string, int>& hosts) {
  DiscoveredNodes found;
  for (const auto& [name, slots] : hosts) {
    const std::string& host = name;  // a structured binding cannot be captured in C++17
    auto node = std::find_if(spec.nodes.begin(), spec.nodes.end(), [&](const NodeSpec& n) {
      return n.host == host || n.address == host || n.MachineName() == host;
    });
    if (node == spec.nodes.end()) {
      found.unknown.push_back(host);
    } else {
      found.nodes.insert(node->host);
    }
  }
  return found;
}

std::string UnknownHostsWarning(const std::vector<std::string>& hosts, bool first_listing) {
  std::string list;
  for (const std::string& h : hosts) list += (list.empty() ? "" : ", ") + h;
  if (first_listing) {
    return fmt::format(
        "--host-discovery-script lists host(s) {} that it did not list at the start; with no "
        "cluster file, -H or --hostfile, the job's nodes are the hosts it listed first, and dtrain "
        "runs ranks only on them (horovodrun would take the new ones in): name every host it may "
        "list with -H or --hostfile (or a cluster file) to have them join",
        list);
  }
  return fmt::format(
      "--host-discovery-script lists host(s) {} that are no node of the job's cluster (by name "
      "or address); dtrain runs ranks only on the cluster's nodes: add them to the cluster file "
      "(or -H, --hostfile) to use them",
      list);
}

HostDiscovery::HostDiscovery(std::string script, int default_slots, int timeout_s)
    : script_(std::move(script)), default_slots_(default_slots), timeout_s_(timeout_s) {}

HostDiscovery::~HostDiscovery() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

DiscoveryRun HostDiscovery::Run() {
  DiscoveryRun run;
  const ShortCommandResult result =
      RunShortCommand({"/bin/sh", "-c", script_}, "", timeout_s_ * 1000);
  if (result.status != 0) {
    std::string err = result.err;
    if (result.status > 0) {
      std::string text = err;
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
      if (text.size() > 300) text = "..." + text.substr(text.size() - 300);
      err = fmt::format("exit {}{}", result.status, text.empty() ? "" : ": " + text);
    } else if (result.started && err.find("/bin/sh did not answer within") != std::string::npos) {
      err = fmt::format("it did not finish within {} s, and was killed", timeout_s_);
    }
    run.error = err;
  } else if (std::optional<std::map<std::string, int>> hosts =
                 ParseDiscoveredHosts(result.out, default_slots_, run.error)) {
    run.ok = true;
    run.hosts = std::move(*hosts);
  }
  std::lock_guard<std::mutex> lock(mu_);
  run.seq = ++runs_;
  latest_ = run;
  if (run.ok) last_good_ = run;
  return run;
}

DiscoveryRun HostDiscovery::RunOnce() {
  return Run();
}

void HostDiscovery::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void HostDiscovery::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_cv_.wait_for(lock, std::chrono::duration<double>(kDiscoveryIntervalS),
                            [this] { return stop_; }))
        return;
    }
    Run();
  }
}

namespace {

// Runs the script until `enough` says its run suffices; the run that did.
DiscoveryRun WaitFor(HostDiscovery& discovery, int timeout_s, const std::string& wanted,
                     const std::function<std::string(const DiscoveryRun&)>& enough) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  std::string said;
  for (;;) {
    const DiscoveryRun run = discovery.RunOnce();
    if (!run.ok && run.seq == 1) {
      throw Error(
          fmt::format("--host-discovery-script \"{}\" failed: {}; no rank was started. "
                      "It runs on this machine as `sh -c SCRIPT` and prints the hosts "
                      "available now, a line each, HOST or HOST:SLOTS",
                      discovery.script(), run.error));
    }
    const std::string short_of = run.ok ? enough(run) : run.error;
    if (short_of.empty()) return run;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Error(fmt::format(
          "--host-discovery-script found {} within --elastic-timeout {} s ({}); no rank was "
          "started. Make more hosts available, or start with fewer (--min-np, -np)",
          short_of, timeout_s, wanted));
    }
    if (short_of != said) {
      std::fprintf(stderr, "dtrain: waiting for --host-discovery-script to list %s: %s so far\n",
                   wanted.c_str(), short_of.c_str());
      said = short_of;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(kDiscoveryIntervalS));
  }
}

}  // namespace

std::set<std::string> WaitForDiscoveredNodes(HostDiscovery& discovery, const ClusterSpec& spec,
                                             int ranks, int timeout_s) {
  std::set<std::string> listed;
  WaitFor(discovery, timeout_s, fmt::format("nodes with {} rank(s)", ranks),
          [&](const DiscoveryRun& run) {
            const DiscoveredNodes found = MatchDiscoveredHosts(spec, run.hosts);
            discovery.SayUnknown(found.unknown);
            int have = 0;
            std::string names;
            listed.clear();
            for (const NodeSpec& node : spec.nodes) {
              if (node.spare || !found.nodes.count(node.host)) continue;
              listed.insert(node.host);
              have += node.slots;
              names += (names.empty() ? "" : ",") + node.host;
            }
            if (have >= ranks) return std::string();
            return fmt::format("{} rank(s) on node(s) {}", have, names.empty() ? "none" : names);
          });
  return listed;
}

std::string WaitForDiscoveredHostList(HostDiscovery& discovery, int timeout_s) {
  const DiscoveryRun run = WaitFor(discovery, timeout_s, "a host", [](const DiscoveryRun& r) {
    return r.hosts.empty() ? std::string("no host") : std::string();
  });
  std::string list;
  for (const auto& [host, slots] : run.hosts)
    list += fmt::format("{}{}:{}", list.empty() ? "" : ",", host, slots > 0 ? slots : 1);
  discovery.NodesAreTheFirstListing();
  return list;
}

void HostDiscovery::NodesAreTheFirstListing() {
  std::lock_guard<std::mutex> lock(mu_);
  first_listing_ = true;
}

void HostDiscovery::SayUnknown(const std::vector<std::string>& unknown) {
  std::vector<std::string> fresh;
  bool first_listing = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& host : unknown) {
      if (unknown_said_.insert(host).second) fresh.push_back(host);
    }
    first_listing = first_listing_;
  }
  if (!fresh.empty()) {
    std::fprintf(stderr, "dtrain: warning: %s\n",
                 UnknownHostsWarning(fresh, first_listing).c_str());
  }
}

DiscoveryRun HostDiscovery::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

DiscoveryRun HostDiscovery::LastGood() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_good_;
}

}  // namespace dtrain
