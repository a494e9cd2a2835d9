// NodeLink: one non-blocking SSH connection carrying some of one node's processes for the ssh
// transport, from connect to the last exit: it logs in (or takes an idle session from
// SshSessionPool), opens a channel per process and starts it (remote_command.h), feeds its
// stdin, and reports its output and its exit into a LinkEventQueue. Nothing here blocks: the
// transport polls every link's socket in one ssh_event and calls Advance() after every poll.
// With a node timeout (dtrain launch) every link that runs processes is watched: every half
// second a "." goes to a heartbeat channel (`cat` on the node, which sends it back, and ends
// when none came for the node timeout: idle_watch.h) and a "." line to every process's channel
// (its dead-man switch, remote_command.h). A link that heard
// nothing from its node for the node timeout is lost: its processes end as lost, naming the node
// and when it last answered, and its connection is dropped without a goodbye.
#pragma once

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/error.h"
#include "launcher/ssh/link_event_queue.h"
#include "launcher/ssh/ssh_session.h"
#include "launcher/transport.h"

namespace dtrain {

// One process on a link (node_link.cpp).
struct LinkProcess;

// Advance() moves a link on after every poll; it reports each process's exit exactly once.
// Destroying a link closes its channels, which terminates the remote process groups. A link
// starts on an idle session from SshSessionPool when there is one, and hands its session back
// there once every process ended well (the connection still good, nothing failed on it).
class NodeLink {
 public:
  using Clock = std::chrono::steady_clock;

  NodeLink(const ClusterSpec& spec, const NodeSpec& node, std::vector<ProcessSpec> procs,
           const SshWatch& watch, bool take_idle_session, LinkEventQueue& events, ssh_event event);
  ~NodeLink();
  NodeLink(const NodeLink&) = delete;
  NodeLink& operator=(const NodeLink&) = delete;

  bool done() const { return done_; }
  // While connecting: when the connect timeout expires; while watched: the next heartbeat.
  std::optional<Clock::time_point> deadline() const;

  void Advance();

  // Delivered to running processes now; processes not started yet never start (and a link
  // still connecting gives up at once).
  void Signal(int sig);

 private:
  bool watched() const { return node_timeout_s_ > 0 && ready_ && !done_; }

  // Heartbeats out, answers in: a node silent for the node timeout is lost.
  void Watch();
  // Opens the heartbeat channel (`cat` on the node) step by step; true once it runs. A node
  // that refuses it (MaxSessions) goes unwatched rather than failing its ranks.
  bool OpenHeartbeat();
  bool NoHeartbeat();
  void FreeHeartbeat();
  // The node answered nothing for the node timeout: its processes are lost. Nothing more is
  // sent to it (no channel close, no goodbye): the socket is shut, so nothing waits on it.
  void Lose(double silent_s);

  void Connect();
  // A session from the pool that fails before anything ran on it (the network dropped it while
  // it waited): log in afresh instead. False when that does not apply.
  bool ConnectAfresh();

  // Opens a channel per process and starts it, one at a time, never waiting.
  void StartProcesses();
  // True once `p` runs; false while waiting for the server.
  bool StartProcess(LinkProcess& p);
  void WriteStdin(LinkProcess& p);
  // Feeds the source while the channel's window takes it; EOF once it is exhausted.
  void StreamStdin(LinkProcess& p);
  Error ChannelError(const LinkProcess& p, const std::string& what) const;

  // Reports processes whose channel the server closed, and everything when the link died.
  void Collect();
  ExitStatus EndStatus(const LinkProcess& p) const;
  bool AllDone() const;
  void Finish(LinkProcess& p, const ExitStatus& status);
  // `lost`: the processes had started (a dropped connection), not failed to start.
  void FailRemaining(const std::string& error, bool lost = false);
  // Every process reported: the connection is no longer needed here. When all went well it
  // waits in the pool for the next transport to this node.
  void Retire();
  void Detach();
  // Closing our side (EOF on the remote stdin) also tells the watcher to end the group.
  void FreeChannel(LinkProcess& p);

  NodeSpec node_;
  double node_timeout_s_;  // 0: not watched
  SshOptions options_;
  std::unique_ptr<SshSession> session_;  // null once handed to the pool
  LinkEventQueue& events_;
  ssh_event event_;
  std::vector<std::unique_ptr<LinkProcess>> procs_;  // stable addresses for the callbacks
  Clock::time_point deadline_;
  bool in_event_ = false;
  bool ready_ = false;
  bool done_ = false;
  bool pooled_ = false;  // the session came from the pool
  bool failed_ = false;  // the connection or a channel on it failed: not for the pool
  int first_signal_ = 0;
  // The heartbeat (node_timeout_s_ > 0).
  ssh_channel heartbeat_channel_ = nullptr;
  ssh_channel_callbacks_struct heartbeat_callbacks_{};
  bool heartbeat_opened_ = false;
  bool heartbeat_ = false;  // running: beats go out
  bool heartbeat_failed_ = false;
  bool watch_started_ = false;
  Clock::time_point next_beat_;
  Clock::time_point heard_;       // the last answer (heartbeat echo or any output)
  Clock::time_point last_heard_;  // heard_ as last seen by Watch(), with its wall-clock time
  std::time_t last_heard_wall_ = 0;
  bool lost_ = false;
};

}  // namespace dtrain
