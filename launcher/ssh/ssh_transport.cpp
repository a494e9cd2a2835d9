// The ssh transport. Each node's processes ride on NodeLinks (node_link.h): one non-blocking
// SSH connection each (at most kChannelsPerConnection processes, under OpenSSH's default
// MaxSessions of 10). One ssh_event polls every link's socket from Poll(), on the caller's
// thread: all nodes connect, exchange keys, authenticate and start at the same time, each against
// its own ssh.connect_timeout deadline, so a slow or dead node never holds up another. With a
// node timeout (dtrain launch) each link that runs processes watches its node and ends them as
// lost when it falls silent (node_link.h).
#include <poll.h>

#include <libssh/libssh.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/ssh/link_event_queue.h"
#include "launcher/ssh/node_link.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChannelsPerConnection = 8;

// SshTransport: groups processes by node into links, polls them all in one ssh_event and relays
// their events.
class SshTransport : public Transport {
 public:
  SshTransport(const ClusterSpec& spec, const SshWatch& watch, bool take_idle_sessions)
      : spec_(spec),
        watch_(watch),
        take_idle_sessions_(take_idle_sessions),
        event_(ssh_event_new()) {
    if (!event_) throw Error("ssh: cannot create an event loop (out of memory)");
  }

  ~SshTransport() override {
    links_.clear();  // before the event they are registered in
    ssh_event_free(event_);
  }

  void Start(const std::vector<ProcessSpec>& procs, TransportEvents&) override {
    std::vector<std::vector<ProcessSpec>> by_node(spec_.nodes.size());
    for (const ProcessSpec& proc : procs) {
      ++running_;
      if (proc.node_index < 0 || proc.node_index >= static_cast<int>(spec_.nodes.size())) {
        ExitStatus status;
        status.error =
            fmt::format("process {}: no node {} in the cluster file", proc.id, proc.node_index);
        queue_.Exit(proc.id, status);
        continue;
      }
      by_node[proc.node_index].push_back(proc);
    }
    for (size_t node = 0; node < by_node.size(); ++node) {
      auto& list = by_node[node];
      for (size_t first = 0; first < list.size(); first += kChannelsPerConnection) {
        const size_t last = std::min(list.size(), first + kChannelsPerConnection);
        std::vector<ProcessSpec> chunk(list.begin() + first, list.begin() + last);
        links_.push_back(std::make_unique<NodeLink>(spec_, spec_.nodes[node], std::move(chunk),
                                                    watch_, take_idle_sessions_, queue_, event_));
        link_node_.push_back(static_cast<int>(node));
      }
    }
    for (auto& link : links_) link->Advance();
  }

  bool Poll(int timeout_ms, TransportEvents& events) override {
    if (running_ == 0) return false;
    // First what needs no waiting: stdin that the last events made ready (a sync's archive once
    // its listing was read, the next clock ping once the last one was answered).
    for (auto& link : links_) link->Advance();
    if (queue_.empty()) {
      Wait(timeout_ms);
      for (auto& link : links_) link->Advance();
    }
    for (LinkEvent& event : queue_.TakeAll()) {
      if (event.exit) {
        --running_;
        events.OnExit(event.id, event.status);
      } else {
        events.OnOutput(event.id, event.stream, event.bytes);
      }
    }
    return running_ > 0;
  }

  void SignalAll(int sig) override {
    for (auto& link : links_) link->Signal(sig);
  }

  void SignalNode(int node_index, int sig) override {
    for (size_t i = 0; i < links_.size(); ++i) {
      if (link_node_[i] == node_index) links_[i]->Signal(sig);
    }
  }

 private:
  // Waits for socket activity on any link, at most timeout_ms and never past a connect deadline.
  void Wait(int timeout_ms) {
    const auto now = Clock::now();
    auto until =
        timeout_ms < 0 ? Clock::time_point::max() : now + std::chrono::milliseconds(timeout_ms);
    bool active = false;
    for (const auto& link : links_) {
      if (link->done()) continue;
      active = true;
      if (auto deadline = link->deadline()) until = std::min(until, *deadline);
    }
    const int wait_ms =
        until == Clock::time_point::max()
            ? -1
            : static_cast<int>(std::max<long long>(
                  0, std::chrono::ceil<std::chrono::milliseconds>(until - now).count()));
    if (active) {
      ssh_event_dopoll(event_, wait_ms);
    } else if (wait_ms > 0) {
      poll(nullptr, 0, wait_ms);  // nothing to wait for but the clock
    }
  }

  ClusterSpec spec_;
  SshWatch watch_;
  bool take_idle_sessions_;
  ssh_event event_;
  LinkEventQueue queue_;
  std::vector<std::unique_ptr<NodeLink>> links_;
  std::vector<int> link_node_;  // each link's node (an index into spec_.nodes)
  int running_ = 0;
};

}  // namespace

std::unique_ptr<Transport> MakeSshTransport(const ClusterSpec& spec, double grace_period_s,
                                            bool take_idle_sessions) {
  return MakeSshTransport(spec, SshWatch{grace_period_s, 0}, take_idle_sessions);
}

std::unique_ptr<Transport> MakeSshTransport(const ClusterSpec& spec, const SshWatch& watch,
                                            bool take_idle_sessions) {
  return std::make_unique<SshTransport>(spec, watch, take_idle_sessions);
}

}  // namespace dtrain
