// SshSessionPool: authenticated SSH connections kept for the next user in this process, so a
// launch logs in to each node about once instead of once per step: the check before launch
// hands its sessions to the job's transport, and the ranks' connections, once the ranks ended,
// carry the end-of-job fetch. A session is kept only while idle (no channel, in no event loop)
// and only for kPoolIdleLimit: an older one may have been dropped by the network without either
// side knowing, so it is closed instead of used. Thread-safe (the clock probe has its own
// thread); a session is used by one thread at a time. The pool is never destroyed: dtrain's main
// closes what waits in it before returning (CloseAtScopeEnd), while OpenSSL and the bastion
// tunnels' thread, which closing needs, are still there.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/ssh/ssh_session.h"

namespace dtrain {

constexpr std::chrono::seconds kPoolIdleLimit{30};

class SshSessionPool {
 public:
  // The process's pool.
  static SshSessionPool& Global();

  // Closes the global pool's sessions when it goes out of scope (at the end of main).
  class CloseAtScopeEnd {
   public:
    CloseAtScopeEnd() = default;
    CloseAtScopeEnd(const CloseAtScopeEnd&) = delete;
    CloseAtScopeEnd& operator=(const CloseAtScopeEnd&) = delete;
    ~CloseAtScopeEnd();
  };

  // An idle authenticated session to `node` reached as `options` say, or nullptr.
  std::unique_ptr<SshSession> Take(const NodeSpec& node, const SshOptions& options);
  // Keeps `session` for the next Take of the same node and options. It must be authenticated,
  // have no channel open and be in no ssh_event. A disconnected one is dropped.
  void Give(const NodeSpec& node, const SshOptions& options, std::unique_ptr<SshSession> session);
  // Closes every session that waits.
  void CloseAll();

 private:
  struct Idle {
    std::unique_ptr<SshSession> session;
    std::chrono::steady_clock::time_point since;
  };
  // Closes the sessions that waited kPoolIdleLimit or longer.
  void DropExpired();

  std::mutex mu_;
  std::map<std::string, std::vector<Idle>> idle_;  // by node and options
};

}  // namespace dtrain
