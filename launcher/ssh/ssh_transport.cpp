// The ssh transport. Each node's processes ride on NodeLinks: one non-blocking SSH connection
// each (at most kChannelsPerConnection processes, under OpenSSH's default MaxSessions of 10).
// One ssh_event polls every link's socket from Poll(), on the caller's thread: all nodes
// connect, exchange keys, authenticate and start at the same time, each against its own
// ssh.connect_timeout deadline, so a slow or dead node never holds up another.
// With a node timeout (dtrain launch) every link that runs processes is watched: every half
// second a "." goes to a heartbeat channel (`cat` on the node, which sends it back) and a "."
// line to every process's channel (its dead-man switch, remote_command.h). A link that heard
// nothing from its node for the node timeout is lost: its processes end as lost, naming the node
// and when it last answered, and its connection is dropped without a goodbye.
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <ctime>
#include <deque>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/local/local_transport.h"
#include "launcher/ssh/remote_command.h"
#include "launcher/ssh/ssh_session.h"
#include "launcher/ssh/ssh_session_pool.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kChannelsPerConnection = 8;
constexpr size_t kStdinChunk = 256 * 1024;
constexpr auto kHeartbeatEvery = std::chrono::milliseconds(500);

// What Poll() hands to TransportEvents, queued while libssh's callbacks run.
struct Event {
  bool exit = false;  // false: output
  int id = 0;
  OutputStream stream = OutputStream::kStdout;
  std::string bytes;
  ExitStatus status;
};

// Output and exits, in the order they happened. Consecutive output of one process is merged.
class EventQueue {
 public:
  void Output(int id, OutputStream stream, const char* data, size_t size) {
    if (!events_.empty() && !events_.back().exit && events_.back().id == id &&
        events_.back().stream == stream) {
      events_.back().bytes.append(data, size);
    } else {
      events_.push_back(Event{false, id, stream, std::string(data, size), {}});
    }
  }
  void Exit(int id, ExitStatus status) {
    events_.push_back(Event{true, id, OutputStream::kStdout, "", std::move(status)});
  }
  bool empty() const { return events_.empty(); }
  std::deque<Event> TakeAll() {
    std::deque<Event> out;
    out.swap(events_);
    return out;
  }

 private:
  std::deque<Event> events_;
};

// One process on a link: its channel, how far it got, what the server said about its end.
struct LinkProcess {
  ProcessSpec spec;
  RemoteCommandOptions options;
  EventQueue* events = nullptr;
  ssh_channel channel = nullptr;
  ssh_channel_callbacks_struct callbacks{};
  std::string command;        // built when its turn to start comes
  bool opened = false;        // the channel is open
  bool started = false;       // the exec request was accepted
  size_t stdin_written = 0;   // bytes of spec.stdin_data sent so far
  std::string stdin_pending;  // from spec.stdin_source, not yet taken by the channel
  bool stdin_exhausted = false;
  bool stdin_closed = false;
  std::optional<int> exit_status;
  std::string exit_signal;  // "TERM" when the server reports a signal
  bool remote_closed = false;
  bool done = false;
  Clock::time_point* heard = nullptr;  // the link's last answer from the node
};

int OnChannelData(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr, void* user) {
  auto* p = static_cast<LinkProcess*>(user);
  if (p->heard) *p->heard = Clock::now();
  p->events->Output(p->spec.id, is_stderr ? OutputStream::kStderr : OutputStream::kStdout,
                    static_cast<const char*>(data), len);
  return static_cast<int>(len);
}

void OnChannelExitStatus(ssh_session, ssh_channel, int status, void* user) {
  static_cast<LinkProcess*>(user)->exit_status = status;
}

void OnChannelExitSignal(ssh_session, ssh_channel, const char* signal, int, const char*,
                         const char*, void* user) {
  static_cast<LinkProcess*>(user)->exit_signal = signal ? signal : "?";
}

void OnChannelClose(ssh_session, ssh_channel, void* user) {
  static_cast<LinkProcess*>(user)->remote_closed = true;
}

int SignalNumber(const std::string& name) {
  for (int sig = 1; sig < 65; ++sig) {
    if (SignalName(sig) == "SIG" + name) return sig;
  }
  return SIGTERM;
}

// The heartbeat channel's answers: anything the node sends back on it.
int OnHeartbeatData(ssh_session, ssh_channel, void*, uint32_t len, int, void* user) {
  *static_cast<Clock::time_point*>(user) = Clock::now();
  return static_cast<int>(len);
}

// "12:01:07", this machine's local time.
std::string ClockTime(std::time_t t) {
  std::tm local{};
  localtime_r(&t, &local);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &local);
  return text;
}

// cwd: the process's own, else workdir (must exist), else the launch directory when the node
// has it (a shared file system), else the login directory.
RemoteCommandOptions CommandOptions(const ClusterSpec& spec, const ProcessSpec& proc,
                                    const SshWatch& watch) {
  RemoteCommandOptions options;
  options.grace_s = watch.grace_period_s;
  options.node_timeout_s = watch.node_timeout_s;
  options.program_dir = SelfExecutableDir();
  if (!proc.cwd.empty()) {
    options.cwd = proc.cwd;
  } else if (!spec.workdir.empty()) {
    options.cwd = spec.workdir;
  } else {
    char buffer[PATH_MAX];
    if (getcwd(buffer, sizeof buffer)) options.cwd = buffer;
    options.cwd_required = false;
  }
  return options;
}

// NodeLink: one SSH connection carrying some of one node's processes, from connect to the last
// exit. Advance() moves it on after every poll; it reports each process's exit exactly once.
// Destroying a link closes its channels, which terminates the remote process groups. A link
// starts on an idle session from SshSessionPool when there is one, and hands its session back
// there once every process ended well (the connection still good, nothing failed on it).
class NodeLink {
 public:
  NodeLink(const ClusterSpec& spec, const NodeSpec& node, std::vector<ProcessSpec> procs,
           const SshWatch& watch, bool take_idle_session, EventQueue& events, ssh_event event)
      : node_(node),
        node_timeout_s_(watch.node_timeout_s),
        options_(spec.ssh),
        session_(take_idle_session ? SshSessionPool::Global().Take(node, spec.ssh) : nullptr),
        events_(events),
        event_(event) {
    for (ProcessSpec& proc : procs) {
      auto p = std::make_unique<LinkProcess>();
      p->options = CommandOptions(spec, proc, watch);
      p->spec = std::move(proc);
      p->events = &events_;
      p->heard = &heard_;
      procs_.push_back(std::move(p));
    }
    if (session_) {
      pooled_ = ready_ = true;  // logged in already
      ssh_event_add_session(event_, session_->handle());
      in_event_ = true;
      return;
    }
    Connect();
  }

  ~NodeLink() {
    for (auto& p : procs_) FreeChannel(*p);
    FreeHeartbeat();
    Detach();
    if (session_) session_->Close();
  }

  bool done() const { return done_; }
  // While connecting: when the connect timeout expires; while watched: the next heartbeat.
  std::optional<Clock::time_point> deadline() const {
    if (done_) return std::nullopt;
    if (!ready_) return deadline_;
    if (watched()) return next_beat_;
    return std::nullopt;
  }

  void Advance() {
    if (done_) return;
    try {
      if (!ready_) {
        if (!session_->Advance()) {
          if (Clock::now() >= deadline_) session_->FailTimeout();
          return;
        }
        ready_ = true;
      }
      StartProcesses();
      Collect();
      Watch();
    } catch (const Error& e) {
      FailRemaining(e.what());
    }
  }

  // Delivered to running processes now; processes not started yet never start (and a link
  // still connecting gives up at once).
  void Signal(int sig) {
    if (done_) return;
    if (first_signal_ == 0) first_signal_ = sig;
    if (!ready_) {
      // Still connecting: nothing runs on the node yet, so stop here rather than wait.
      for (auto& p : procs_) {
        ExitStatus status;
        status.signal = sig;
        if (!p->done) Finish(*p, status);
      }
      Retire();
      return;
    }
    const std::string line = RemoteSignalLine(sig);
    for (auto& p : procs_) {
      // The remote watcher turns a line on the channel's stdin into kill(-pgid, sig).
      if (p->started && !p->done && !p->remote_closed) {
        ssh_channel_write(p->channel, line.data(), line.size());
      }
    }
  }

 private:
  bool watched() const { return node_timeout_s_ > 0 && ready_ && !done_; }

  // Heartbeats out, answers in: a node silent for the node timeout is lost.
  void Watch() {
    if (!watched()) return;
    const auto now = Clock::now();
    if (!watch_started_) {
      watch_started_ = true;
      heard_ = next_beat_ = now;
    }
    if (!heartbeat_ && !heartbeat_failed_) OpenHeartbeat();
    if (now >= next_beat_) {
      next_beat_ = now + kHeartbeatEvery;
      if (heartbeat_) ssh_channel_write(heartbeat_channel_, ".", 1);
      for (auto& p : procs_) {
        if (p->started && !p->done && !p->remote_closed && !p->spec.stdin_source) {
          ssh_channel_write(p->channel, kHeartbeatLine.data(), kHeartbeatLine.size());
        }
      }
    }
    if (heard_ > last_heard_) {
      last_heard_ = heard_;
      last_heard_wall_ = std::time(nullptr);
    }
    const double silent_s = std::chrono::duration<double>(now - heard_).count();
    if (!heartbeat_failed_ && silent_s >= node_timeout_s_) Lose(silent_s);
  }

  // Opens the heartbeat channel (`cat` on the node) step by step; true once it runs. A node
  // that refuses it (MaxSessions) goes unwatched rather than failing its ranks.
  bool OpenHeartbeat() {
    if (!heartbeat_channel_) {
      heartbeat_channel_ = ssh_channel_new(session_->handle());
      if (!heartbeat_channel_) return NoHeartbeat();
    }
    if (!heartbeat_opened_) {
      const int rc = ssh_channel_open_session(heartbeat_channel_);
      if (rc == SSH_AGAIN) return false;
      if (rc != SSH_OK) return NoHeartbeat();
      heartbeat_opened_ = true;
      ssh_callbacks_init(&heartbeat_callbacks_);
      heartbeat_callbacks_.userdata = &heard_;
      heartbeat_callbacks_.channel_data_function = OnHeartbeatData;
      ssh_set_channel_callbacks(heartbeat_channel_, &heartbeat_callbacks_);
    }
    const int rc = ssh_channel_request_exec(heartbeat_channel_, "exec cat");
    if (rc == SSH_AGAIN) return false;
    if (rc != SSH_OK) return NoHeartbeat();
    heartbeat_ = true;
    return true;
  }

  bool NoHeartbeat() {
    std::fprintf(stderr,
                 "dtrain: warning: %s: no heartbeat channel (%s); a lost node is not noticed "
                 "before its connection drops\n",
                 session_->where().c_str(), session_->LastError().c_str());
    heartbeat_failed_ = true;
    FreeHeartbeat();
    return false;
  }

  void FreeHeartbeat() {
    if (!heartbeat_channel_) return;
    if (heartbeat_opened_) ssh_remove_channel_callbacks(heartbeat_channel_, &heartbeat_callbacks_);
    if (!lost_ && ssh_channel_is_open(heartbeat_channel_)) ssh_channel_close(heartbeat_channel_);
    ssh_channel_free(heartbeat_channel_);
    heartbeat_channel_ = nullptr;
  }

  // The node answered nothing for the node timeout: its processes are lost. Nothing more is
  // sent to it (no channel close, no goodbye): the socket is shut, so nothing waits on it.
  void Lose(double silent_s) {
    lost_ = true;
    const std::string error =
        fmt::format("node {} lost: no answer for {:.0f} s, last seen {}", node_.host, silent_s,
                    last_heard_wall_ ? ClockTime(last_heard_wall_) : std::string("never"));
    if (const socket_t fd = ssh_get_fd(session_->handle()); fd != SSH_INVALID_SOCKET) {
      ::shutdown(fd, SHUT_RDWR);
    }
    FailRemaining(error, /*lost=*/true);
  }

  void Connect() {
    session_ = std::make_unique<SshSession>(node_, options_);
    deadline_ = Clock::now() + std::chrono::seconds(std::max(1, options_.connect_timeout_s));
    try {
      session_->Begin();
      // ConnectTimeout from ~/.ssh/config and bastions' timeouts are known now.
      deadline_ = Clock::now() + std::chrono::seconds(std::max(1, session_->connect_timeout_s()));
      ssh_event_add_session(event_, session_->handle());
      in_event_ = true;
    } catch (const Error& e) {
      FailRemaining(e.what());
    }
  }

  // A session from the pool that fails before anything ran on it (the network dropped it while
  // it waited): log in afresh instead. False when that does not apply.
  bool ConnectAfresh() {
    if (!pooled_ || std::any_of(procs_.begin(), procs_.end(),
                                [](const auto& p) { return p->started || p->done; })) {
      return false;
    }
    pooled_ = ready_ = false;
    for (auto& p : procs_) {
      FreeChannel(*p);
      p->opened = false;
    }
    Detach();
    session_->Close();
    Connect();
    return true;
  }

  // Opens a channel per process and starts it, one at a time, never waiting.
  void StartProcesses() {
    for (auto& p : procs_) {
      if (p->done || p->started) continue;
      if (first_signal_ != 0) {
        ExitStatus status;
        status.signal = first_signal_;  // never started: ended by the signal that cancelled it
        Finish(*p, status);
        continue;
      }
      try {
        if (!StartProcess(*p)) return;  // waiting for the server
      } catch (const Error& e) {
        if (ConnectAfresh()) return;
        failed_ = true;
        ExitStatus status;
        status.error = e.what();
        Finish(*p, status);
      }
    }
  }

  // True once `p` runs; false while waiting for the server.
  bool StartProcess(LinkProcess& p) {
    if (p.command.empty()) p.command = BuildRemoteCommand(p.spec, p.options);
    if (!p.channel) {
      p.channel = ssh_channel_new(session_->handle());
      if (!p.channel) throw ChannelError(p, "cannot create a channel");
    }
    if (!p.opened) {
      const int rc = ssh_channel_open_session(p.channel);
      if (rc == SSH_AGAIN) return false;
      if (rc != SSH_OK) {
        throw ChannelError(p,
                           "cannot open a channel (the server's MaxSessions allows fewer "
                           "sessions per connection?)");
      }
      p.opened = true;
      ssh_callbacks_init(&p.callbacks);
      p.callbacks.userdata = &p;
      p.callbacks.channel_data_function = OnChannelData;
      p.callbacks.channel_exit_status_function = OnChannelExitStatus;
      p.callbacks.channel_exit_signal_function = OnChannelExitSignal;
      p.callbacks.channel_close_function = OnChannelClose;
      ssh_set_channel_callbacks(p.channel, &p.callbacks);
    }
    const int rc = ssh_channel_request_exec(p.channel, p.command.c_str());
    if (rc == SSH_AGAIN) return false;
    if (rc != SSH_OK) throw ChannelError(p, "cannot start the command");
    p.started = true;
    WriteStdin(p);
    return true;
  }

  void WriteStdin(LinkProcess& p) {
    if (p.spec.stdin_source) return StreamStdin(p);
    const std::string& data = p.spec.stdin_data;
    if (!p.started || p.remote_closed || p.stdin_written >= data.size()) return;
    const int n =
        ssh_channel_write(p.channel, data.data() + p.stdin_written, data.size() - p.stdin_written);
    if (n == SSH_ERROR) throw ChannelError(p, "cannot send stdin");
    if (n > 0) p.stdin_written += n;
  }

  // Feeds the source while the channel's window takes it; EOF once it is exhausted.
  void StreamStdin(LinkProcess& p) {
    if (!p.started || p.remote_closed || p.stdin_closed) return;
    while (true) {
      if (p.stdin_pending.empty() && !p.stdin_exhausted) {
        p.stdin_exhausted = !p.spec.stdin_source->Next(p.stdin_pending, kStdinChunk);
      }
      if (p.stdin_pending.empty()) break;
      const int n = ssh_channel_write(p.channel, p.stdin_pending.data(),
                                      static_cast<uint32_t>(p.stdin_pending.size()));
      if (n == SSH_ERROR) throw ChannelError(p, "cannot send stdin");
      if (n <= 0) return;  // the window is full: more after the server's next adjust
      p.stdin_pending.erase(0, n);
      if (!p.stdin_pending.empty()) return;
    }
    if (p.stdin_exhausted) {
      ssh_channel_send_eof(p.channel);
      p.stdin_closed = true;
    }
  }

  Error ChannelError(const LinkProcess& p, const std::string& what) const {
    return Error(fmt::format("{}: ssh: process {}: {}: {}", session_->where(), p.spec.id, what,
                             session_->LastError()));
  }

  // Reports processes whose channel the server closed, and everything when the link died.
  void Collect() {
    for (auto& p : procs_) {
      if (p->done) continue;
      WriteStdin(*p);
      if (p->remote_closed) Finish(*p, EndStatus(*p));
    }
    if (!ssh_is_connected(session_->handle())) {
      if (ConnectAfresh()) return;
      FailRemaining(
          fmt::format("{}: ssh: connection lost: {}", session_->where(), session_->LastError()),
          /*lost=*/true);
    }
    if (AllDone()) Retire();
  }

  ExitStatus EndStatus(const LinkProcess& p) const {
    ExitStatus status;
    if (!p.exit_signal.empty()) {
      status.signal = SignalNumber(p.exit_signal);
    } else if (p.exit_status) {
      status = ExitStatus::FromShellStatus(*p.exit_status);
    } else {
      status.error = fmt::format("{}: ssh: process {} ended without an exit status",
                                 session_->where(), p.spec.id);
      status.lost = true;
    }
    return status;
  }

  bool AllDone() const {
    return std::all_of(procs_.begin(), procs_.end(), [](const auto& p) { return p->done; });
  }

  void Finish(LinkProcess& p, const ExitStatus& status) {
    p.done = true;
    FreeChannel(p);
    events_.Exit(p.spec.id, status);
  }

  // `lost`: the processes had started (a dropped connection), not failed to start.
  void FailRemaining(const std::string& error, bool lost = false) {
    failed_ = true;
    for (auto& p : procs_) {
      if (p->done) continue;
      ExitStatus status;
      status.error = error;
      status.lost = lost;
      Finish(*p, status);
    }
    Retire();
  }

  // Every process reported: the connection is no longer needed here. When all went well it
  // waits in the pool for the next transport to this node.
  void Retire() {
    done_ = true;
    FreeHeartbeat();
    Detach();
    if (ready_ && !failed_ && first_signal_ == 0) {
      SshSessionPool::Global().Give(node_, options_, std::move(session_));
      return;
    }
    if (session_) session_->Close();
  }

  void Detach() {
    if (in_event_ && session_) ssh_event_remove_session(event_, session_->handle());
    in_event_ = false;
  }

  // Closing our side (EOF on the remote stdin) also tells the watcher to end the group.
  void FreeChannel(LinkProcess& p) {
    if (!p.channel) return;
    if (p.opened) ssh_remove_channel_callbacks(p.channel, &p.callbacks);
    if (!lost_ && ssh_channel_is_open(p.channel)) ssh_channel_close(p.channel);
    ssh_channel_free(p.channel);
    p.channel = nullptr;
  }

  NodeSpec node_;
  double node_timeout_s_;  // 0: not watched
  SshOptions options_;
  std::unique_ptr<SshSession> session_;  // null once handed to the pool
  EventQueue& events_;
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
    for (Event& event : queue_.TakeAll()) {
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
  EventQueue queue_;
  std::vector<std::unique_ptr<NodeLink>> links_;
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
