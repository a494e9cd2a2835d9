// The rules about connections: the launcher reaching each node over the cluster's transport,
// and each node reaching the rendezvous port on the first node.
#include "doctor/checks.h"

#include "launcher/ssh/ssh_session.h"

#include <fmt/format.h>

#include "doctor/check_support.h"

namespace dtrain {

using checks::EveryNodeChecked;
using checks::Make;
using checks::Reached;

namespace {

std::string ReachRemedy(ReachFailure failure, const NodeFacts& n, int ssh_port) {
  switch (failure) {
    case ReachFailure::kAuth:
      return "install your public key on the node (ssh-copy-id) or set ssh.identity_file / "
             "ssh.user";
    case ReachFailure::kHostKey:
      return fmt::format(
          "check the host key and add it to known_hosts ({}), or use "
          "ssh.host_key_policy: accept-new for new hosts",
          KeyscanCommand(n.address, ssh_port));
    case ReachFailure::kTimeout:
      return "check that the node is up and the address is right; raise ssh.connect_timeout or "
             "--timeout if it is just slow";
    case ReachFailure::kRefused:
      return "start sshd on the node, or set ssh.port to the port it listens on";
    case ReachFailure::kUnresolved:
      return "fix the node's address in the cluster file (or its DNS / /etc/hosts entry)";
    case ReachFailure::kNetwork:
      return fmt::format(
          "{}:{} cannot be reached from this machine: check it with `nc -vz {} {}` and the route "
          "with `ip route get {}` (a firewall, a VPN that is down, a wrong address:); then "
          "`ssh -p {} {} true`",
          n.address, ssh_port, n.address, ssh_port, n.address, ssh_port, n.address);
    case ReachFailure::kNone:
    case ReachFailure::kCutShort:  // CheckReach says it once for all such nodes
    case ReachFailure::kOther:
      break;
  }
  return fmt::format(
      "check the connection to {}:{} by hand: `nc -vz {} {}`, then `ssh -p {} {} true` shows the "
      "error as OpenSSH reports it",
      n.address, ssh_port, n.address, ssh_port, ssh_port, n.address);
}

}  // namespace

std::vector<Finding> CheckReach(const std::vector<NodeFacts>& nodes, int ssh_port) {
  std::vector<Finding> out;
  std::vector<std::string> cut_short;
  for (const auto& n : nodes) {
    if (n.reached) continue;
    if (n.failure == ReachFailure::kCutShort) {
      cut_short.push_back(n.host);
      continue;
    }
    std::string reason = n.failure == ReachFailure::kOther || n.failure == ReachFailure::kNone
                             ? ""
                             : std::string(ReachFailureName(n.failure)) + ": ";
    // The transport's errors name the node themselves; once is enough.
    const std::string prefix = fmt::format("node {} ({}): ", n.host, n.address);
    const std::string error =
        n.error.rfind(prefix, 0) == 0 ? n.error.substr(prefix.size()) : n.error;
    out.push_back(Make(
        Severity::kError, "reach", "reach", {n.host},
        fmt::format("node {} ({}) could not be probed: {}{}", n.host, n.address, reason, error),
        ReachRemedy(n.failure, n, ssh_port)));
  }
  if (!cut_short.empty()) {
    // Nothing is known of them, good or bad: a warning, never a reason to leave a node out.
    out.push_back(
        Make(Severity::kWarning, "reach", "reach", cut_short,
             fmt::format("{} {} not checked: the doctor was interrupted before {} "
                         "probe ended",
                         cut_short.size() == 1 ? "node" : "nodes", checks::Join(cut_short),
                         cut_short.size() == 1 ? "its" : "their"),
             "run `dtrain doctor` again and let it end: a node that does not answer "
             "is named once --timeout is up"));
  }
  if (out.empty()) {
    out.push_back(Make(
        Severity::kOk, "reach", "reach", {},
        fmt::format("{} reached without a prompt",
                    nodes.size() == 1 ? "the node" : fmt::format("all {} nodes", nodes.size()))));
  }
  return out;
}

std::vector<Finding> CheckRendezvous(const ProbeRun& run) {
  std::vector<Finding> out;
  if (run.nodes.empty() || !run.nodes[0].reached) return out;
  const std::string target = fmt::format("{}:{}", run.master_addr, run.master_port);
  const std::string& first = run.nodes[0].host;
  if (!run.listener.started) {
    bool busy = run.listener.error.find("in use") != std::string::npos;
    out.push_back(Make(busy ? Severity::kError : Severity::kWarning, "rendezvous", "rdzv", {first},
                       fmt::format("rendezvous not tested: could not listen on {} on {}: {}",
                                   run.master_port, first, run.listener.error),
                       busy ? "stop what holds the port (a previous job?) or choose another "
                              "rendezvous.port"
                            : "make Python available on the first node (`python:`) to test it"));
    return out;
  }
  for (const NodeFacts* n : Reached(run.nodes)) {
    if (n->rendezvous == "ok") continue;
    bool untested = n->rendezvous == "untested" || n->rendezvous.empty();
    std::string detail = n->rendezvous_detail.empty() ? "" : " (" + n->rendezvous_detail + ")";
    out.push_back(Make(
        untested ? Severity::kWarning : Severity::kError, "rendezvous", "rdzv", {n->host},
        untested ? fmt::format("node {}: rendezvous not tested{}", n->host, detail)
                 : fmt::format("node {} cannot connect to MASTER_ADDR:MASTER_PORT {}: {}{}",
                               n->host, target, n->rendezvous, detail),
        untested ? "install bash and coreutils' timeout, or Python, on the node"
                 : fmt::format("allow TCP port {} from {} to {} (firewall, security group) and "
                               "check it from {}: `nc -vz {} {}`, `ip route get {}`; or choose "
                               "another rendezvous.port",
                               run.master_port, n->host, first, n->host, run.master_addr,
                               run.master_port, run.master_addr)));
  }
  if (out.empty()) {
    const size_t checked = Reached(run.nodes).size();
    out.push_back(
        Make(Severity::kOk, "rendezvous", "rdzv", {},
             fmt::format("{} connect{} to {}", EveryNodeChecked(checked, run.nodes.size()),
                         checked < run.nodes.size() ? "" : "s", target)));
  }
  return out;
}

}  // namespace dtrain
