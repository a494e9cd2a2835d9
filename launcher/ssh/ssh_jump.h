// JumpTunnel: a TCP connection to a node opened by a bastion (ProxyJump), presented as a local
// socket that an SshSession uses as its connection (SSH_OPTIONS_FD). Every tunnel through the
// same chain of bastions shares one SSH connection per bastion; one thread per process owns
// those connections and moves bytes between each tunnel's socket and its direct-tcpip channel.
// Bastions are SshSessions too: host key verified, authenticated, never prompting.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "launcher/ssh/ssh_config.h"

namespace dtrain {

class JumpNetwork;

class JumpTunnel {
 public:
  struct Shared;  // what the tunnel thread tells the session: error and state
  ~JumpTunnel();
  // The session's end of the socket pair; the SshSession owns it once given to libssh.
  int fd() const { return fd_; }
  // Why the tunnel failed ("bastion node0 (10.0.0.10): ssh: host key ... CHANGED ..."), or "".
  std::string error() const;
  // While connecting: which step the tunnel is at, for a timeout message.
  std::string state() const;

 private:
  friend class JumpNetwork;
  friend std::unique_ptr<JumpTunnel> OpenJumpTunnel(const std::vector<SshTarget>&,
                                                    const std::string&, int);
  std::shared_ptr<JumpNetwork> network_;
  std::shared_ptr<Shared> shared_;
  int fd_ = -1;
};

// Opens a tunnel to address:port through `jumps` (first reached directly). Never blocks: the
// connection to the bastions and the channel are made by the tunnel thread, and any failure is
// reported by JumpTunnel::error() (the socket then reads end-of-file).
std::unique_ptr<JumpTunnel> OpenJumpTunnel(const std::vector<SshTarget>& jumps,
                                           const std::string& address, int port);

}  // namespace dtrain
