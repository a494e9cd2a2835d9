// One ssh_event polls a session per node (SshSession: connect, host key, authentication) until
// every node is through or has failed; nothing is run on the nodes. A node that got through
// leaves its session in SshSessionPool, so the job's transport does not log in again.
#include "launcher/ssh/ssh_preflight.h"

#include <libssh/libssh.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/job_supervisor.h"
#include "launcher/ssh/ssh_session.h"
#include "launcher/ssh/ssh_session_pool.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

// How often the wait looks at the interrupt flag even when no socket moves.
constexpr int kPollSliceMs = 100;

// One node's check: its session, its deadline, and how it ended.
struct NodeCheck {
  const NodeSpec* node = nullptr;
  std::unique_ptr<SshSession> session;
  Clock::time_point deadline;
  bool in_event = false;
  bool done = false;
  std::string error;       // set when the node failed
  bool unreached = false;  // it failed before the server answered (SshSession::unreached)
};

// Every session in one ssh_event; the event lets go of each session before it is freed.
class NodeChecks {
 public:
  explicit NodeChecks(const ClusterSpec& spec) : options_(spec.ssh), event_(ssh_event_new()) {
    if (!event_) throw Error("ssh: cannot create an event loop (out of memory)");
    std::set<std::string> seen;
    for (const NodeSpec& node : spec.nodes) {
      if (!seen.insert(node.host).second) continue;
      NodeCheck check;
      check.node = &node;
      check.session = std::make_unique<SshSession>(node, spec.ssh);
      check.deadline = Clock::now() + std::chrono::seconds(std::max(1, spec.ssh.connect_timeout_s));
      checks_.push_back(std::move(check));
    }
    for (NodeCheck& check : checks_) Begin(check);
  }
  ~NodeChecks() {
    for (NodeCheck& check : checks_) Finish(check);
    ssh_event_free(event_);
  }
  NodeChecks(const NodeChecks&) = delete;
  NodeChecks& operator=(const NodeChecks&) = delete;

  // Moves every node on; true once all are through or failed.
  bool Advance() {
    bool all_done = true;
    for (NodeCheck& check : checks_) {
      if (check.done) continue;
      try {
        if (check.session->Advance()) {
          Finish(check, /*through=*/true);
        } else if (Clock::now() >= check.deadline) {
          check.session->FailTimeout();
        }
      } catch (const Error& e) {
        check.error = e.what();
        check.unreached = check.session->unreached();
        Finish(check);
      }
      all_done = all_done && check.done;
    }
    return all_done;
  }

  // Waits for socket activity, at most kPollSliceMs and never past a node's deadline.
  void Wait() {
    auto until = Clock::now() + std::chrono::milliseconds(kPollSliceMs);
    for (const NodeCheck& check : checks_) {
      if (!check.done) until = std::min(until, check.deadline);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    ssh_event_dopoll(event_, static_cast<int>(std::max<long long>(0, wait)));
  }

  std::vector<std::string> Errors() const {
    std::vector<std::string> out;
    for (const NodeCheck& check : checks_) {
      if (!check.error.empty()) out.push_back(check.error);
    }
    return out;
  }
  // The failed nodes when every one of them could not be reached; empty otherwise.
  UnreachedNodes OnlyUnreached() const {
    UnreachedNodes out;
    for (const NodeCheck& check : checks_) {
      if (check.error.empty()) continue;
      if (!check.unreached) return {};
      out[check.node->host] = check.error;
    }
    return out;
  }
  size_t size() const { return checks_.size(); }

 private:
  void Begin(NodeCheck& check) {
    try {
      check.session->Begin();
      // ConnectTimeout from ~/.ssh/config and bastions' timeouts are known now.
      check.deadline =
          Clock::now() + std::chrono::seconds(std::max(1, check.session->connect_timeout_s()));
      ssh_event_add_session(event_, check.session->handle());
      check.in_event = true;
    } catch (const Error& e) {
      check.error = e.what();
      check.unreached = check.session->unreached();
      Finish(check);
    }
  }
  // `through`: connected, host key verified and logged in; the session goes to the pool.
  void Finish(NodeCheck& check, bool through = false) {
    check.done = true;
    if (check.in_event) ssh_event_remove_session(event_, check.session->handle());
    check.in_event = false;
    if (through) {
      SshSessionPool::Global().Give(*check.node, options_, std::move(check.session));
    } else if (check.session) {
      check.session->Close();
    }
  }

  SshOptions options_;
  ssh_event event_;
  std::vector<NodeCheck> checks_;
};

}  // namespace

UnreachedNodes PreflightSshNodes(const ClusterSpec& spec,
                                 const std::function<bool(const UnreachedNodes&)>& go_on_without) {
  if (spec.transport != TransportKind::kSsh || spec.nodes.empty()) return {};
  InterruptHandlers interrupts;
  NodeChecks checks(spec);
  while (!checks.Advance()) {
    if (const int sig = JobSupervisor::InterruptSignal()) {
      throw Error(
          fmt::format("interrupted by {} while connecting to the nodes; no rank was started",
                      SignalName(sig)),
          128 + sig);
    }
    checks.Wait();
  }
  const std::vector<std::string> errors = checks.Errors();
  if (errors.empty()) return {};
  const UnreachedNodes unreached = checks.OnlyUnreached();
  if (!unreached.empty() && go_on_without && go_on_without(unreached)) return unreached;
  std::string text = fmt::format(
      "{} of {} node(s) of {} failed the check before launch; no rank was started on any node:",
      errors.size(), checks.size(), spec.source.empty() ? "the cluster" : spec.source);
  for (const std::string& error : errors) text += "\n  " + error;
  throw Error(text, kExitNodeUnusable);
}

}  // namespace dtrain
