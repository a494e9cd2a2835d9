#include "launcher/ssh/ssh_session_pool.h"

#include <fmt/format.h>

namespace dtrain {
namespace {

// Everything that decides where and as whom a session logs in.
std::string PoolKey(const NodeSpec& node, const SshOptions& o) {
  return fmt::format("{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}", node.host, node.address, o.user, o.port,
                     o.identity_file, o.known_hosts, static_cast<int>(o.host_key_policy),
                     o.config, o.proxy_jump);
}

}  // namespace

SshSessionPool& SshSessionPool::Global() {
  // Never destroyed: at exit OpenSSL, which a session needs to close, may already be gone.
  static SshSessionPool* pool = new SshSessionPool;
  return *pool;
}

void SshSessionPool::CloseAll() {
  std::map<std::string, std::vector<Idle>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(idle_);
  }
}  // the sessions close here, outside the lock

SshSessionPool::CloseAtScopeEnd::~CloseAtScopeEnd() {
  Global().CloseAll();
}

std::unique_ptr<SshSession> SshSessionPool::Take(const NodeSpec& node, const SshOptions& options) {
  DropExpired();
  std::unique_ptr<SshSession> session;
  std::vector<Idle> gone;  // no longer connected
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.find(PoolKey(node, options));
    while (it != idle_.end() && !it->second.empty() && !session) {
      Idle last = std::move(it->second.back());
      it->second.pop_back();
      if (ssh_is_connected(last.session->handle())) {
        session = std::move(last.session);
      } else {
        gone.push_back(std::move(last));
      }
    }
  }
  return session;  // `gone` sessions are freed here, outside the lock
}

void SshSessionPool::Give(const NodeSpec& node, const SshOptions& options,
                          std::unique_ptr<SshSession> session) {
  if (!session || !session->handle() || !ssh_is_connected(session->handle())) return;
  DropExpired();
  std::lock_guard<std::mutex> lock(mu_);
  idle_[PoolKey(node, options)].push_back({std::move(session), std::chrono::steady_clock::now()});
}

void SshSessionPool::DropExpired() {
  std::vector<Idle> expired;  // closed on return, outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [key, sessions] : idle_) {
      for (auto it = sessions.begin(); it != sessions.end();) {
        if (now - it->since >= kPoolIdleLimit) {
          expired.push_back(std::move(*it));
          it = sessions.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
}

}  // namespace dtrain
