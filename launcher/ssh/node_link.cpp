// How a NodeLink moves on: every libssh call is non-blocking (SSH_AGAIN: again after the next
// poll). Each process's channel callbacks queue its output at once and record in its LinkProcess
// how it ended; Collect() reports the end once the server closed the channel.
#include "launcher/ssh/node_link.h"

#include <limits.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>

#include <fmt/format.h>

#include "launcher/local/local_transport.h"
#include "launcher/ssh/idle_watch.h"
#include "launcher/ssh/remote_command.h"
#include "launcher/ssh/ssh_session_pool.h"

namespace dtrain {
namespace {

using Clock = NodeLink::Clock;

constexpr size_t kStdinChunk = 256 * 1024;
constexpr auto kHeartbeatEvery = std::chrono::milliseconds(500);
// A heartbeat this late, as a share of the node timeout, is said (once per process): the
// nodes' dead-man switches end every rank when it reaches the whole timeout.
constexpr double kLateBeatShare = 0.5;
std::atomic<bool> g_said_late_beat{false};

}  // namespace

// One process on a link: its channel, how far it got, what the server said about its end.
struct LinkProcess {
  ProcessSpec spec;
  RemoteCommandOptions options;
  LinkEventQueue* events = nullptr;
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

namespace {

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

}  // namespace

NodeLink::NodeLink(const ClusterSpec& spec, const NodeSpec& node, std::vector<ProcessSpec> procs,
                   const SshWatch& watch, bool take_idle_session, LinkEventQueue& events,
                   ssh_event event)
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

NodeLink::~NodeLink() {
  for (auto& p : procs_) FreeChannel(*p);
  FreeHeartbeat();
  Detach();
  if (session_) session_->Close();
}

std::optional<NodeLink::Clock::time_point> NodeLink::deadline() const {
  if (done_) return std::nullopt;
  if (!ready_) return deadline_;
  if (watched()) return next_beat_;
  return std::nullopt;
}

void NodeLink::Advance() {
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

void NodeLink::Signal(int sig) {
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

void NodeLink::Watch() {
  if (!watched()) return;
  const auto now = Clock::now();
  if (!watch_started_) {
    watch_started_ = true;
    heard_ = next_beat_ = now;
  }
  if (!heartbeat_ && !heartbeat_failed_) OpenHeartbeat();
  if (now >= next_beat_) {
    // dtrain itself was held up (stopped, starved, or blocked on this thread): say so, as the
    // ranks' ends that may follow name no node.
    const double late_s = std::chrono::duration<double>(now - next_beat_).count();
    if (late_s >= kLateBeatShare * node_timeout_s_ && !g_said_late_beat.exchange(true)) {
      std::fprintf(stderr,
                   "dtrain: warning: heartbeats to the nodes went out %.1f s late (dtrain was "
                   "held up); a node that hears none for --node-timeout %g s ends its ranks\n",
                   late_s, node_timeout_s_);
    }
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

bool NodeLink::OpenHeartbeat() {
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
  const int rc =
      ssh_channel_request_exec(heartbeat_channel_, HeartbeatCommand(node_timeout_s_).c_str());
  if (rc == SSH_AGAIN) return false;
  if (rc != SSH_OK) return NoHeartbeat();
  heartbeat_ = true;
  return true;
}

bool NodeLink::NoHeartbeat() {
  std::fprintf(stderr,
               "dtrain: warning: %s: no heartbeat channel (%s); a lost node is not noticed "
               "before its connection drops\n",
               session_->where().c_str(), session_->LastError().c_str());
  heartbeat_failed_ = true;
  FreeHeartbeat();
  return false;
}

void NodeLink::FreeHeartbeat() {
  if (!heartbeat_channel_) return;
  if (heartbeat_opened_) ssh_remove_channel_callbacks(heartbeat_channel_, &heartbeat_callbacks_);
  if (!lost_ && ssh_channel_is_open(heartbeat_channel_)) ssh_channel_close(heartbeat_channel_);
  ssh_channel_free(heartbeat_channel_);
  heartbeat_channel_ = nullptr;
}

void NodeLink::Lose(double silent_s) {
  lost_ = true;
  const std::string error = ExitStatus::NodeLost(node_.host, silent_s, last_heard_wall_).error;
  if (const socket_t fd = ssh_get_fd(session_->handle()); fd != SSH_INVALID_SOCKET) {
    ::shutdown(fd, SHUT_RDWR);
  }
  FailRemaining(error, /*lost=*/true);
}

void NodeLink::Connect() {
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

bool NodeLink::ConnectAfresh() {
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

void NodeLink::StartProcesses() {
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

bool NodeLink::StartProcess(LinkProcess& p) {
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

void NodeLink::WriteStdin(LinkProcess& p) {
  if (p.spec.stdin_source) return StreamStdin(p);
  const std::string& data = p.spec.stdin_data;
  if (!p.started || p.remote_closed || p.stdin_written >= data.size()) return;
  const int n =
      ssh_channel_write(p.channel, data.data() + p.stdin_written, data.size() - p.stdin_written);
  if (n == SSH_ERROR) throw ChannelError(p, "cannot send stdin");
  if (n > 0) p.stdin_written += n;
}

void NodeLink::StreamStdin(LinkProcess& p) {
  if (!p.started || p.remote_closed || p.stdin_closed) return;
  // The next chunk once libssh has handed the last to the kernel: what waits in libssh goes out
  // in one send() (ssh_session.cpp), and a heartbeat queues behind it; so each stays short, on a
  // slow link as on a fast one.
  while (!(ssh_get_status(session_->handle()) & SSH_WRITE_PENDING)) {
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
  if (p.stdin_exhausted && p.stdin_pending.empty()) {
    ssh_channel_send_eof(p.channel);
    p.stdin_closed = true;
  }
}

Error NodeLink::ChannelError(const LinkProcess& p, const std::string& what) const {
  return Error(fmt::format("{}: ssh: process {}: {}: {}", session_->where(), p.spec.id, what,
                           session_->LastError()));
}

void NodeLink::Collect() {
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

ExitStatus NodeLink::EndStatus(const LinkProcess& p) const {
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

bool NodeLink::AllDone() const {
  return std::all_of(procs_.begin(), procs_.end(), [](const auto& p) { return p->done; });
}

void NodeLink::Finish(LinkProcess& p, const ExitStatus& status) {
  p.done = true;
  FreeChannel(p);
  events_.Exit(p.spec.id, status);
}

void NodeLink::FailRemaining(const std::string& error, bool lost) {
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

void NodeLink::Retire() {
  done_ = true;
  FreeHeartbeat();
  Detach();
  if (ready_ && !failed_ && first_signal_ == 0) {
    SshSessionPool::Global().Give(node_, options_, std::move(session_));
    return;
  }
  if (session_) session_->Close();
}

void NodeLink::Detach() {
  if (in_event_ && session_) ssh_event_remove_session(event_, session_->handle());
  in_event_ = false;
}

void NodeLink::FreeChannel(LinkProcess& p) {
  if (!p.channel) return;
  if (p.opened) ssh_remove_channel_callbacks(p.channel, &p.callbacks);
  if (!lost_ && ssh_channel_is_open(p.channel)) ssh_channel_close(p.channel);
  ssh_channel_free(p.channel);
  p.channel = nullptr;
}

}  // namespace dtrain
