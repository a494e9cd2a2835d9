// The ssh transport. Each node's processes ride on NodeLinks: one SSH connection each (at most
// kChannelsPerConnection processes, under OpenSSH's default MaxSessions of 10), every link driven
// by its own thread with a blocking connect bounded by ssh.connect_timeout, so a slow or dead
// node never holds up another. Events from all links meet in one queue that Poll() delivers on
// the caller's thread, each link's events in the order it produced them.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <libssh/callbacks.h>
#include <libssh/libssh.h>

#include <climits>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/remote_command.h"
#include "launcher/ssh_session.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

constexpr size_t kChannelsPerConnection = 8;
constexpr int kGraceSeconds = 5;
constexpr size_t kMaxCoalescedOutput = 1 << 20;

struct Event {
  bool exit = false;  // false: output
  int id = 0;
  std::string bytes;
  ExitStatus status;
};

// EventQueue: output and exits from every link. Consecutive output of one process is merged
// while it waits, so a chatty rank costs one event per Poll rather than one per packet.
class EventQueue {
 public:
  void Output(int id, const char* data, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!events_.empty() && !events_.back().exit && events_.back().id == id &&
        events_.back().bytes.size() < kMaxCoalescedOutput) {
      events_.back().bytes.append(data, size);
    } else {
      events_.push_back(Event{false, id, std::string(data, size), {}});
    }
    ready_.notify_one();
  }

  void Exit(int id, ExitStatus status) {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(Event{true, id, "", std::move(status)});
    ready_.notify_one();
  }

  // Waits up to timeout_ms (negative: no limit) for an event; returns everything queued.
  std::deque<Event> Take(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mutex_);
    auto has_events = [this] { return !events_.empty(); };
    if (timeout_ms < 0) {
      ready_.wait(lock, has_events);
    } else {
      ready_.wait_for(lock, std::chrono::milliseconds(timeout_ms), has_events);
    }
    std::deque<Event> out;
    out.swap(events_);
    return out;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
};

// One process on a link: its channel and what the server said about how it ended.
struct LinkProcess {
  ProcessSpec spec;
  RemoteCommandOptions options;
  EventQueue* events = nullptr;
  ssh_channel channel = nullptr;
  ssh_channel_callbacks_struct callbacks{};
  std::optional<int> exit_status;
  std::string exit_signal;  // "TERM" when the server reports a signal
  bool remote_closed = false;
  bool done = false;
};

int OnChannelData(ssh_session, ssh_channel, void* data, uint32_t len, int, void* user) {
  auto* p = static_cast<LinkProcess*>(user);
  p->events->Output(p->spec.id, static_cast<const char*>(data), len);
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

// cwd: the process's own, else workdir (must exist), else the launch directory when the node
// has it (a shared file system), else the login directory.
RemoteCommandOptions CommandOptions(const ClusterSpec& spec, const ProcessSpec& proc) {
  RemoteCommandOptions options;
  options.grace_seconds = kGraceSeconds;
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

// NodeLink: one SSH connection carrying some of one node's processes, run by its own thread
// from connect to the last exit. Signal() and the destructor may be called from any thread;
// destroying a link closes its channels, which terminates the remote process groups.
class NodeLink {
 public:
  NodeLink(const ClusterSpec& spec, const NodeSpec& node, std::vector<ProcessSpec> procs,
           EventQueue& events)
      : session_(node, spec.ssh), events_(events) {
    for (ProcessSpec& proc : procs) {
      auto p = std::make_unique<LinkProcess>();
      p->options = CommandOptions(spec, proc);
      p->spec = std::move(proc);
      p->events = &events_;
      procs_.push_back(std::move(p));
    }
    if (pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) {
      throw Error(fmt::format("{}: cannot create a pipe: {}", session_.where(), strerror(errno)));
    }
    thread_ = std::thread([this] { Run(); });
  }

  ~NodeLink() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    Wake();
    thread_.join();
    close(wake_[0]);
    close(wake_[1]);
  }

  void Signal(int sig) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      signals_.push_back(sig);
      if (first_signal_ == 0) first_signal_ = sig;
    }
    Wake();
  }

 private:
  void Wake() {
    const char byte = 1;
    [[maybe_unused]] ssize_t n = write(wake_[1], &byte, 1);
  }

  void Run() {
    try {
      session_.Open();
      StartProcesses();
      Pump();
    } catch (const std::exception& e) {
      FailRemaining(e.what());
    }
    for (auto& p : procs_) FreeChannel(*p);
    session_.Close();
  }

  // Opens a channel per process and starts it, unless the job was signalled meanwhile.
  void StartProcesses() {
    for (auto& p : procs_) {
      int signalled = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) return;
        signalled = first_signal_;
      }
      if (signalled != 0) {
        ExitStatus status;
        status.signal = signalled;  // never started: ended by the signal that cancelled it
        Finish(*p, status);
        continue;
      }
      try {
        StartProcess(*p);
      } catch (const Error& e) {
        ExitStatus status;
        status.error = e.what();
        Finish(*p, status);
      }
    }
  }

  void StartProcess(LinkProcess& p) {
    const std::string command = BuildRemoteCommand(p.spec, p.options);
    ssh_session s = session_.handle();
    p.channel = ssh_channel_new(s);
    if (!p.channel || ssh_channel_open_session(p.channel) != SSH_OK) {
      throw Error(
          fmt::format("{}: ssh: cannot open a channel for process {}: {} (the server's "
                      "MaxSessions allows fewer sessions per connection?)",
                      session_.where(), p.spec.id, session_.LastError()));
    }
    ssh_callbacks_init(&p.callbacks);
    p.callbacks.userdata = &p;
    p.callbacks.channel_data_function = OnChannelData;
    p.callbacks.channel_exit_status_function = OnChannelExitStatus;
    p.callbacks.channel_exit_signal_function = OnChannelExitSignal;
    p.callbacks.channel_close_function = OnChannelClose;
    ssh_set_channel_callbacks(p.channel, &p.callbacks);
    if (ssh_channel_request_exec(p.channel, command.c_str()) != SSH_OK) {
      throw Error(fmt::format("{}: ssh: cannot start process {}: {}", session_.where(), p.spec.id,
                              session_.LastError()));
    }
    if (!p.spec.stdin_data.empty() && ssh_channel_write(p.channel, p.spec.stdin_data.data(),
                                                        p.spec.stdin_data.size()) == SSH_ERROR) {
      throw Error(fmt::format("{}: ssh: cannot send stdin to process {}: {}", session_.where(),
                              p.spec.id, session_.LastError()));
    }
  }

  static int OnWake(socket_t fd, int, void*) {
    char buffer[64];
    while (read(fd, buffer, sizeof buffer) > 0) {
    }
    return 0;
  }

  // Delivers output and exits until every process ended or the link is stopped.
  void Pump() {
    ssh_session s = session_.handle();
    ssh_set_blocking(s, 0);
    ssh_event event = ssh_event_new();
    ssh_event_add_session(event, s);
    ssh_event_add_fd(event, wake_[0], POLLIN, OnWake, this);
    while (!AllDone()) {
      const int rc = ssh_event_dopoll(event, 1000);
      std::vector<int> signals;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) break;
        signals.swap(signals_);
      }
      for (int sig : signals) Forward(sig);
      for (auto& p : procs_) {
        if (!p->done && p->remote_closed) Finish(*p, EndStatus(*p));
      }
      if (rc == SSH_ERROR || !ssh_is_connected(s)) {
        FailRemaining(
            fmt::format("{}: ssh: connection lost: {}", session_.where(), session_.LastError()));
        break;
      }
    }
    ssh_event_remove_fd(event, wake_[0]);
    ssh_event_remove_session(event, s);
    ssh_event_free(event);
    ssh_set_blocking(s, 1);
  }

  // The remote watcher turns a line on the channel's stdin into kill(-pgid, sig).
  void Forward(int sig) {
    const std::string line = RemoteSignalLine(sig);
    for (auto& p : procs_) {
      if (p->done || p->remote_closed || !p->channel) continue;
      ssh_channel_write(p->channel, line.data(), line.size());
    }
  }

  ExitStatus EndStatus(const LinkProcess& p) const {
    if (!p.exit_signal.empty()) {
      ExitStatus status;
      status.signal = SignalNumber(p.exit_signal);
      return status;
    }
    if (p.exit_status) return RemoteExitStatus(*p.exit_status);
    ExitStatus status;
    status.error = fmt::format("{}: ssh: process {} ended without an exit status", session_.where(),
                               p.spec.id);
    return status;
  }

  bool AllDone() const {
    for (const auto& p : procs_) {
      if (!p->done) return false;
    }
    return true;
  }

  void Finish(LinkProcess& p, const ExitStatus& status) {
    p.done = true;
    FreeChannel(p);
    events_.Exit(p.spec.id, status);
  }

  void FailRemaining(const std::string& error) {
    for (auto& p : procs_) {
      if (p->done) continue;
      ExitStatus status;
      status.error = error;
      Finish(*p, status);
    }
  }

  // Closing our side (EOF on the remote stdin) also tells the watcher to end the group.
  void FreeChannel(LinkProcess& p) {
    if (!p.channel) return;
    ssh_remove_channel_callbacks(p.channel, &p.callbacks);
    if (ssh_channel_is_open(p.channel)) ssh_channel_close(p.channel);
    ssh_channel_free(p.channel);
    p.channel = nullptr;
  }

  SshSession session_;
  EventQueue& events_;
  std::vector<std::unique_ptr<LinkProcess>> procs_;  // stable addresses for the callbacks
  int wake_[2] = {-1, -1};
  std::mutex mutex_;
  std::vector<int> signals_;
  int first_signal_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// SshTransport: groups processes by node into links and relays their events.
class SshTransport : public Transport {
 public:
  explicit SshTransport(const ClusterSpec& spec) : spec_(spec) {}

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
        links_.push_back(
            std::make_unique<NodeLink>(spec_, spec_.nodes[node], std::move(chunk), queue_));
      }
    }
  }

  bool Poll(int timeout_ms, TransportEvents& events) override {
    if (running_ == 0) return false;
    for (Event& event : queue_.Take(timeout_ms)) {
      if (event.exit) {
        --running_;
        events.OnExit(event.id, event.status);
      } else {
        events.OnOutput(event.id, event.bytes);
      }
    }
    return running_ > 0;
  }

  void SignalAll(int sig) override {
    for (auto& link : links_) link->Signal(sig);
  }

 private:
  ClusterSpec spec_;
  EventQueue queue_;  // declared before links_: links push into it until they are destroyed
  std::vector<std::unique_ptr<NodeLink>> links_;
  int running_ = 0;
};

}  // namespace

std::unique_ptr<Transport> MakeSshTransport(const ClusterSpec& spec) {
  return std::make_unique<SshTransport>(spec);
}

}  // namespace dtrain
