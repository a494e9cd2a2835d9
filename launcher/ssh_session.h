// SshSession: one SSH connection to one node, host key verified against known_hosts and
// authenticated without ever prompting. Blocking calls are bounded by ssh.connect_timeout;
// a session is used by one thread at a time.
#pragma once

#include <libssh/libssh.h>

#include <string>

#include "launcher/cluster_spec.h"

namespace dtrain {

class SshSession {
 public:
  SshSession(const NodeSpec& node, const SshOptions& options);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  // Connects, verifies the host key (host_key_policy) and authenticates: identity_file, then
  // ssh-agent, then ~/.ssh/id_{ed25519,ecdsa,rsa}. Throws Error("node X (addr): ssh: ...").
  void Open();
  // Closes the connection; the server then closes every channel's stdin.
  void Close();

  ssh_session handle() const { return session_; }
  // "node gpu-a (10.0.0.11)": how errors name this node.
  const std::string& where() const { return where_; }
  // libssh's last error for this session, for messages.
  std::string LastError() const;

 private:
  void Connect();
  void VerifyHostKey();
  void Authenticate();
  [[noreturn]] void Fail(const std::string& what) const;

  NodeSpec node_;
  SshOptions options_;
  std::string where_;
  std::string known_hosts_;
  ssh_session session_ = nullptr;
};

// "~/x" -> "$HOME/x"; other paths unchanged.
std::string ExpandHome(const std::string& path);

}  // namespace dtrain
