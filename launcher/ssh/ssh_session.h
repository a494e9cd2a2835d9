// SshSession: one non-blocking SSH connection to one node (or bastion), configured by the
// cluster file and ~/.ssh/config (ssh_config.h), reached directly or through bastions
// (ssh_jump.h), host key verified against known_hosts and authenticated without ever prompting.
// Advance() moves it on as far as the server's replies allow, so one thread drives many sessions;
// nothing here ever blocks.
#pragma once

#include <libssh/libssh.h>

#include <memory>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"
#include "launcher/ssh/ssh_config.h"

namespace dtrain {

class JumpTunnel;

class SshSession {
 public:
  // The target is resolved (cluster file + ssh config) in Begin(), so a bad config is an error
  // of this node like any other.
  SshSession(const NodeSpec& node, const SshOptions& options);
  // An already resolved target; `tunnel` (optional) is the connection to use instead of TCP
  // (a bastion reached through an earlier bastion).
  SshSession(const SshTarget& target, std::unique_ptr<JumpTunnel> tunnel);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  // Creates the session and starts connecting. Throws Error("node X (addr): ssh: ...").
  void Begin();
  // Connect, then verify the host key (host_key_policy), then authenticate: identity_file and
  // the config's IdentityFiles, then ssh-agent, then ~/.ssh/id_{ed25519,ecdsa,rsa} (neither of
  // the last two with IdentitiesOnly). True once authenticated; false while
  // waiting for the server; throws Error naming the node on any failure.
  bool Advance();
  // The error for a session that did not get through Advance() within ssh.connect_timeout.
  [[noreturn]] void FailTimeout() const;
  // Seconds allowed to get through Advance(): the node's connect timeout plus its bastions'.
  int connect_timeout_s() const;
  // Closes the connection; the server then closes every channel's stdin.
  void Close();

  ssh_session handle() const { return session_; }
  // "node gpu-a (10.0.0.11)", "node gpu-b (10.0.0.12 via bastion)": how errors name it.
  const std::string& where() const { return where_; }
  // libssh's last error for this session, for messages.
  std::string LastError() const;
  // True until the server answered with its SSH greeting and key exchange: a failure before that
  // (no answer, refused, a name that does not resolve, a bastion down) means the node could not
  // be reached, not that it answered wrongly (host key, login).
  bool unreached() const { return !connected_; }

 private:
  enum class Step { kConnect, kAuthenticate, kReady };
  // One way to authenticate, tried in order; `path` empty means the agent.
  struct Credential {
    std::string path;
    bool named = false;  // the cluster file's identity_file: report it even when missing
  };

  void Resolve();
  bool AdvanceConnect();
  // A tunnel's own failure (the bastion's), which explains a failure seen on this session.
  void FailFromTunnel() const;
  void VerifyHostKey();
  bool AdvanceAuthentication();
  // One attempt with credentials_[next_credential_]: true on success, false while waiting;
  // moves to the next credential when this one is refused.
  bool TryCredential(bool& waiting);
  [[noreturn]] void Fail(const std::string& what) const;

  NodeSpec node_;
  SshOptions options_;
  bool resolved_ = false;
  SshTarget target_;
  std::unique_ptr<JumpTunnel> tunnel_;
  std::string where_;
  std::string known_hosts_;
  ssh_session session_ = nullptr;
  Step step_ = Step::kConnect;
  bool connected_ = false;  // ssh_connect finished: the key exchange is done
  std::vector<Credential> credentials_;
  size_t next_credential_ = 0;
  ssh_key key_ = nullptr;  // the key file being offered, while the server answers
  std::vector<std::string> tried_;
};

// "~/x" -> "$HOME/x"; other paths unchanged.
std::string ExpandHome(const std::string& path);

// "ssh-keyscan 10.0.0.1", or "ssh-keyscan -p 2222 10.0.0.1" for a node on another port (whose
// known_hosts entry is then "[10.0.0.1]:2222").
std::string KeyscanCommand(const std::string& address, int port);
// The name known_hosts files it under: "10.0.0.1", or "[10.0.0.1]:2222".
std::string KnownHostsName(const std::string& address, int port);

}  // namespace dtrain
