// The tunnel thread. One ssh_event polls every bastion connection, the wake-up pipe and the
// local end of every tunnel's socket pair; after each poll every bastion moves on (connect,
// verify, authenticate, exactly as a node's SshSession does) and every tunnel moves bytes both
// ways, each direction buffered up to kBufferLimit so a slow side never stalls the others.
// A bastion reached through an earlier one (ProxyJump a,b) rides on a tunnel of that one, so
// chains are tunnels all the way down, all on this one thread.
#include "launcher/ssh/ssh_jump.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/ssh/ssh_session.h"

namespace dtrain {

struct JumpTunnel::Shared {
  mutable std::mutex mutex;
  std::string error;
  std::string state = "waiting for the bastion's connection";
};

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kBufferLimit = 256 * 1024;
constexpr size_t kChunk = 64 * 1024;

std::string ChainKey(const std::vector<SshTarget>& jumps) {
  std::string key;
  for (const SshTarget& j : jumps) {
    key += fmt::format("{}@{}:{}|", j.user, j.address, j.port);
  }
  return key;
}

void SetState(JumpTunnel::Shared& shared, const std::string& state) {
  std::lock_guard<std::mutex> lock(shared.mutex);
  shared.state = state;
}

struct Request {
  std::vector<SshTarget> jumps;
  std::string address;
  int port = 22;
  int fd = -1;  // the tunnel thread's end
  std::shared_ptr<JumpTunnel::Shared> shared;
};

// One bastion connection, shared by every tunnel through the same chain.
struct Bastion {
  SshTarget target;
  std::unique_ptr<SshSession> session;
  bool in_event = false;
  bool ready = false;
  std::string error;
  Clock::time_point deadline;
};

// One tunnel inside the thread.
struct Pipe {
  Request request;
  Bastion* bastion = nullptr;
  ssh_channel channel = nullptr;
  bool opened = false;
  bool socket_eof = false;
  bool done = false;
  std::string to_channel, to_socket;
};

int IgnoreEvent(socket_t, int, void*) { return 0; }

}  // namespace

// Owns the thread; alive while any tunnel handle is.
class JumpNetwork {
 public:
  JumpNetwork() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw Error("ssh: cannot create a pipe for tunnels");
    wake_read_ = fds[0];
    wake_write_ = fds[1];
    thread_ = std::thread([this] { Run(); });
  }
  ~JumpNetwork() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    Wake();
    thread_.join();
    close(wake_read_);
    close(wake_write_);
  }

  void Submit(Request request) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      requests_.push_back(std::move(request));
    }
    Wake();
  }

 private:
  void Wake() {
    const char byte = 1;
    (void)!write(wake_write_, &byte, 1);
  }

  void Run() {
    event_ = ssh_event_new();
    ssh_event_add_fd(event_, wake_read_, POLLIN, IgnoreEvent, nullptr);
    while (true) {
      char drain[64];
      while (read(wake_read_, drain, sizeof drain) > 0) {
      }
      std::vector<Request> requests;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stop_) break;
        requests.swap(requests_);
      }
      for (Request& r : requests) Add(std::move(r));
      bool busy = false;
      for (auto& [key, bastion] : bastions_) AdvanceBastion(*bastion);
      for (auto& pipe : pipes_) busy = Pump(*pipe) || busy;
      for (size_t i = 0; i < pipes_.size();) {
        if (pipes_[i]->done) {
          Release(*pipes_[i]);
          pipes_.erase(pipes_.begin() + i);
        } else {
          ++i;
        }
      }
      ssh_event_dopoll(event_, busy ? 5 : 100);
    }
    for (auto& pipe : pipes_) Release(*pipe);
    pipes_.clear();
    for (auto& [key, bastion] : bastions_) {
      if (bastion->in_event) ssh_event_remove_session(event_, bastion->session->handle());
    }
    bastions_.clear();  // closes every bastion connection
    ssh_event_remove_fd(event_, wake_read_);  // ssh_event_free leaves an fd's record allocated
    ssh_event_free(event_);
  }

  void Add(Request request) {
    const std::string key = ChainKey(request.jumps);
    auto it = bastions_.find(key);
    if (it == bastions_.end()) {
      auto bastion = std::make_unique<Bastion>();
      bastion->target = request.jumps.back();
      bastion->deadline =
          Clock::now() + std::chrono::seconds(std::max(1, bastion->target.connect_timeout_s));
      try {
        std::unique_ptr<JumpTunnel> via;
        if (request.jumps.size() > 1) {
          // This bastion is reached through the ones before it: a tunnel of this same thread.
          std::vector<SshTarget> earlier(request.jumps.begin(), request.jumps.end() - 1);
          via = OpenInside(earlier, bastion->target.address, bastion->target.port);
          bastion->target.jumps = earlier;
        }
        bastion->session = std::make_unique<SshSession>(bastion->target, std::move(via));
      } catch (const Error& e) {
        bastion->error = e.what();
      }
      it = bastions_.emplace(key, std::move(bastion)).first;
    }
    auto pipe = std::make_unique<Pipe>();
    pipe->request = std::move(request);
    pipe->bastion = it->second.get();
    ssh_event_add_fd(event_, pipe->request.fd, POLLIN, IgnoreEvent, nullptr);
    pipes_.push_back(std::move(pipe));
  }

  // A tunnel for a later bastion of a chain, made here rather than through Submit.
  std::unique_ptr<JumpTunnel> OpenInside(const std::vector<SshTarget>& jumps,
                                         const std::string& address, int port);

  void AdvanceBastion(Bastion& b) {
    if (b.ready || !b.error.empty()) return;
    try {
      if (!b.in_event) {
        b.session->Begin();
        ssh_event_add_session(event_, b.session->handle());
        b.in_event = true;
      }
      if (b.session->Advance()) {
        b.ready = true;
      } else if (Clock::now() >= b.deadline) {
        b.session->FailTimeout();
      }
    } catch (const Error& e) {
      b.error = e.what();
    }
  }

  void Fail(Pipe& p, const std::string& error) {
    {
      std::lock_guard<std::mutex> lock(p.request.shared->mutex);
      p.request.shared->error = error;
    }
    p.done = true;
  }

  // Moves what it can; true when bytes are waiting for a side that could not take them yet.
  bool Pump(Pipe& p) {
    if (p.done) return false;
    Bastion& b = *p.bastion;
    if (!b.error.empty()) {
      Fail(p, b.error);
      return false;
    }
    if (!b.ready) return false;
    const std::string where = b.target.Where();
    if (!p.channel) {
      p.channel = ssh_channel_new(b.session->handle());
      if (!p.channel) {
        Fail(p, fmt::format("{}: ssh: cannot create a channel", where));
        return false;
      }
      SetState(*p.request.shared, "asking the bastion to connect");
    }
    if (!p.opened) {
      const int rc = ssh_channel_open_forward(p.channel, p.request.address.c_str(),
                                              p.request.port, "127.0.0.1", 22);
      if (rc == SSH_AGAIN) return false;
      if (rc != SSH_OK) {
        Fail(p, fmt::format("{}: ssh: the bastion cannot open a connection to {} port {}: {} "
                            "(is the node up, and does the bastion's sshd allow "
                            "AllowTcpForwarding?)",
                            where, p.request.address, p.request.port, b.session->LastError()));
        return false;
      }
      p.opened = true;
      SetState(*p.request.shared, "connected through the bastion");
    }
    char buffer[kChunk];
    // node session -> channel
    if (!p.socket_eof && p.to_channel.size() < kBufferLimit) {
      const ssize_t n = read(p.request.fd, buffer, sizeof buffer);
      if (n > 0) p.to_channel.append(buffer, n);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) p.socket_eof = true;
    }
    if (!p.to_channel.empty()) {
      const int n = ssh_channel_write(p.channel, p.to_channel.data(),
                                      static_cast<uint32_t>(std::min(p.to_channel.size(), kChunk)));
      if (n == SSH_ERROR) {
        Fail(p, fmt::format("{}: ssh: tunnel to {}: {}", where, p.request.address,
                            b.session->LastError()));
        return false;
      }
      if (n > 0) p.to_channel.erase(0, n);
    }
    if (p.socket_eof && p.to_channel.empty()) {
      p.done = true;  // the node's session is gone: nothing more to carry
      return false;
    }
    // channel -> node session
    while (p.to_socket.size() < kBufferLimit) {
      const int n = ssh_channel_read_nonblocking(p.channel, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      p.to_socket.append(buffer, n);
    }
    if (!p.to_socket.empty()) {
      const ssize_t n = write(p.request.fd, p.to_socket.data(), p.to_socket.size());
      if (n > 0) p.to_socket.erase(0, n);
    }
    if (p.to_socket.empty() && (ssh_channel_is_eof(p.channel) || ssh_channel_is_closed(p.channel))) {
      p.done = true;  // the node closed the connection: the session reads end-of-file
      return false;
    }
    if (!ssh_is_connected(b.session->handle())) {
      b.error = fmt::format("{}: ssh: connection lost: {}", where, b.session->LastError());
      Fail(p, b.error);
      return false;
    }
    return !p.to_socket.empty() || !p.to_channel.empty();
  }

  void Release(Pipe& p) {
    if (p.channel) {
      if (ssh_channel_is_open(p.channel)) ssh_channel_close(p.channel);
      ssh_channel_free(p.channel);
      p.channel = nullptr;
    }
    ssh_event_remove_fd(event_, p.request.fd);
    close(p.request.fd);
  }

  std::mutex mutex_;
  std::vector<Request> requests_;
  bool stop_ = false;
  int wake_read_ = -1, wake_write_ = -1;
  std::thread thread_;
  // The thread's own:
  ssh_event event_ = nullptr;
  std::map<std::string, std::unique_ptr<Bastion>> bastions_;
  std::vector<std::unique_ptr<Pipe>> pipes_;
};

namespace {

std::mutex registry_mutex;
std::weak_ptr<JumpNetwork> registry;

std::shared_ptr<JumpNetwork> Network() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::shared_ptr<JumpNetwork> network = registry.lock();
  if (!network) {
    network = std::make_shared<JumpNetwork>();
    registry = network;
  }
  return network;
}

// A socket pair: [0] for the session, [1] (non-blocking) for the tunnel thread.
void SocketPair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw Error(fmt::format("ssh: cannot create a socket pair for a tunnel: {}", std::strerror(errno)));
  }
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
}

}  // namespace

JumpTunnel::~JumpTunnel() = default;

std::string JumpTunnel::error() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->error;
}

std::string JumpTunnel::state() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->state;
}

std::unique_ptr<JumpTunnel> JumpNetwork::OpenInside(const std::vector<SshTarget>& jumps,
                                                    const std::string& address, int port) {
  int fds[2];
  SocketPair(fds);
  auto tunnel = std::make_unique<JumpTunnel>();
  tunnel->shared_ = std::make_shared<JumpTunnel::Shared>();
  tunnel->fd_ = fds[0];
  Add(Request{jumps, address, port, fds[1], tunnel->shared_});
  return tunnel;
}

std::unique_ptr<JumpTunnel> OpenJumpTunnel(const std::vector<SshTarget>& jumps,
                                           const std::string& address, int port) {
  int fds[2];
  SocketPair(fds);
  auto tunnel = std::unique_ptr<JumpTunnel>(new JumpTunnel());
  tunnel->network_ = Network();
  tunnel->shared_ = std::make_shared<JumpTunnel::Shared>();
  tunnel->fd_ = fds[0];
  tunnel->network_->Submit(Request{jumps, address, port, fds[1], tunnel->shared_});
  return tunnel;
}

}  // namespace dtrain
