#include "launcher/ssh/launch_dir_sync.h"

#include <cstdio>
#include <exception>
#include <utility>

#include "launcher/job_supervisor.h"

namespace dtrain {
namespace {

// The nodes of `spec` named in `hosts`, in its order.
ClusterSpec OnlyNodes(const ClusterSpec& spec, const std::set<std::string>& hosts) {
  ClusterSpec only = spec;
  only.nodes.clear();
  for (const NodeSpec& node : spec.nodes) {
    if (hosts.count(node.host)) only.nodes.push_back(node);
  }
  return only;
}

// NodeSyncResult::node is "host (address)".
std::string HostOf(const NodeSyncResult& result) {
  const size_t space = result.node.find(" (");
  return space == std::string::npos ? result.node : result.node.substr(0, space);
}

}  // namespace

LaunchDirSync::LaunchDirSync(std::string source, std::string exclude) {
  options_.source = std::move(source);
  options_.exclude = std::move(exclude);
  // Ctrl-C (the launch's InterruptHandlers) cuts a sync short; the launch then ends interrupted.
  options_.cancelled = [] { return JobSupervisor::InterruptSignal() != 0; };
}

LaunchDirSync::~LaunchDirSync() {
  for (auto& [host, running] : running_) {
    if (running.valid()) running.wait();
  }
}

std::map<std::string, std::string> LaunchDirSync::SyncNow(const ClusterSpec& spec, bool progress) {
  std::set<std::string> hosts;
  for (const NodeSpec& node : spec.nodes) {
    if (!synced_.count(node.host) && !running_.count(node.host)) hosts.insert(node.host);
  }
  std::map<std::string, std::string> failed;
  if (hosts.empty()) return failed;
  SyncOptions options = options_;
  options.progress = progress;
  const SyncReport report = SyncWorkdir(OnlyNodes(spec, hosts), options);
  std::fputs(DescribeSync(report).c_str(), stderr);
  for (const NodeSyncResult& result : report.nodes) {
    if (result.error.empty()) {
      synced_.insert(HostOf(result));
    } else {
      failed[HostOf(result)] = result.error;
    }
  }
  return failed;
}

LaunchDirSync::State LaunchDirSync::Poll(const ClusterSpec& spec, const std::string& host,
                                         std::string& why) {
  if (synced_.count(host)) return State::kSynced;
  auto running = running_.find(host);
  if (running != running_.end()) {
    if (running->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      return State::kBusy;
    const SyncReport report = running->second.get();
    running_.erase(running);
    std::fputs(DescribeSync(report).c_str(), stderr);
    if (report.ok()) {
      synced_.insert(host);
      return State::kSynced;
    }
    Failure failure;
    failure.why = report.nodes.empty() ? "no node synced" : report.nodes.front().error;
    failure.at = std::chrono::steady_clock::now();
    failed_[host] = failure;
    why = failure.why;
    return State::kFailed;
  }
  auto failure = failed_.find(host);
  if (failure != failed_.end()) {
    if (std::chrono::steady_clock::now() - failure->second.at <
        std::chrono::duration<double>(kRetryS)) {
      why = failure->second.why;
      return State::kFailed;
    }
    failed_.erase(failure);
  }
  const ClusterSpec one = OnlyNodes(spec, {host});
  if (one.nodes.empty()) {
    why = "node " + host + " is not in the cluster";
    return State::kFailed;
  }
  SyncOptions options = options_;
  options.progress = false;
  running_[host] = std::async(std::launch::async, [one, options] {
    try {
      return SyncWorkdir(one, options);
    } catch (const std::exception& e) {
      SyncReport report;
      NodeSyncResult result;
      result.node = one.nodes.front().host;
      result.error = e.what();
      report.nodes.push_back(result);
      return report;
    }
  });
  return State::kBusy;
}

}  // namespace dtrain
