// Connect, verify, authenticate: the three steps before any channel, each failing with a message
// that names the node, its address and what to do. Every libssh call is non-blocking (SSH_AGAIN
// means: call again once the socket moved). No step can prompt: keys that need a passphrase are
// skipped (they belong in ssh-agent) and password methods are never tried.
#include "launcher/ssh/ssh_session.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/ssh/ssh_jump.h"

namespace dtrain {
namespace {

// accept-new appends to the shared known_hosts file; one writer at a time.
std::mutex known_hosts_write_mutex;

std::string HomeDirectory() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_dir;
  return "/";
}

bool FileExists(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

// A node that vanishes without closing the connection (power, network) is noticed within about
// 30 s instead of TCP's hours: the transport then reports its ranks as lost.
void EnableKeepalive(int fd) {
  if (fd < 0) return;
  const int on = 1, idle = 15, interval = 5, count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

// libssh makes its socket blocking once connected and writes its whole output buffer in one
// send() when poll said the socket is writable: to a node whose link is slow or gone, that send
// would hold up dtrain's one poll loop, every other node with it, until the kernel took it all.
// With a send timeout it returns what the kernel took by then (never nothing: poll saw room) and
// libssh keeps the rest for the next poll.
void BoundBlockingWrites(int fd) {
  if (fd < 0) return;
  const timeval limit{0, 10 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
}

// "ssh-ed25519 SHA256:..." for a key, or "" when libssh cannot hash it.
std::string Fingerprint(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t length = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length) != SSH_OK) return "";
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length);
  ssh_clean_pubkey_hash(&hash);
  std::string out = fmt::format("{} {}", ssh_key_type_to_char(ssh_key_type(key)), text ? text : "");
  ssh_string_free_char(text);
  return out;
}

// The fingerprints `known_hosts` holds for `host` ("addr" or "[addr]:port", hashed entries
// included), in file order: what a changed host key was expected to be.
std::vector<std::string> RecordedFingerprints(const std::string& known_hosts,
                                              const std::string& host) {
  std::vector<std::string> out;
  std::ifstream in(known_hosts);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    ssh_knownhosts_entry* entry = nullptr;
    if (ssh_known_hosts_parse_line(host.c_str(), line.c_str(), &entry) == SSH_OK && entry) {
      out.push_back(Fingerprint(entry->publickey));
    }
    ssh_knownhosts_entry_free(entry);
  }
  return out;
}

}  // namespace

std::string ExpandHome(const std::string& path) {
  if (path == "~") return HomeDirectory();
  if (path.rfind("~/", 0) == 0) return HomeDirectory() + path.substr(1);
  return path;
}

std::string KeyscanCommand(const std::string& address, int port) {
  return port == 22 ? "ssh-keyscan " + address
                    : "ssh-keyscan -p " + std::to_string(port) + " " + address;
}

std::string KnownHostsName(const std::string& address, int port) {
  return port == 22 ? address : "[" + address + "]:" + std::to_string(port);
}

SshSession::SshSession(const NodeSpec& node, const SshOptions& options)
    : node_(node), options_(options) {
  if (node_.address.empty()) node_.address = node_.host;
  where_ = fmt::format("node {} ({})", node_.host, node_.address);
}

SshSession::SshSession(const SshTarget& target, std::unique_ptr<JumpTunnel> tunnel)
    : resolved_(true), target_(target), tunnel_(std::move(tunnel)) {
  where_ = target_.Where();
  known_hosts_ = target_.known_hosts;
}

void SshSession::Resolve() {
  if (resolved_) return;
  try {
    target_ = ResolveSshTarget(node_, options_);
  } catch (const Error& e) {
    Fail(e.what());
  }
  resolved_ = true;
  where_ = target_.Where();
  known_hosts_ = target_.known_hosts;
}

int SshSession::connect_timeout_s() const {
  int total = target_.connect_timeout_s;
  for (const SshTarget& jump : target_.jumps) total += jump.connect_timeout_s;
  return total;
}

void SshSession::FailFromTunnel() const {
  if (!tunnel_) return;
  const std::string error = tunnel_->error();
  if (!error.empty()) throw Error(fmt::format("{}: {}", where_, error));
}

SshSession::~SshSession() {
  if (key_) ssh_key_free(key_);
  Close();
  if (session_) ssh_free(session_);
  tunnel_.reset();  // after libssh let go of its socket
}

void SshSession::Close() {
  if (session_ && ssh_is_connected(session_)) ssh_disconnect(session_);
}

std::string SshSession::LastError() const {
  const char* error = session_ ? ssh_get_error(session_) : nullptr;
  return error && *error ? error : "unknown error";
}

void SshSession::Fail(const std::string& what) const {
  throw Error(fmt::format("{}: ssh: {}", where_, what));
}

void SshSession::FailTimeout() const {
  const int timeout = connect_timeout_s();
  FailFromTunnel();
  if (tunnel_ && step_ == Step::kConnect) {
    Fail(fmt::format("no SSH greeting through the bastion within {} s (ssh.connect_timeout, "
                     "bastions included): {}",
                     timeout, tunnel_->state()));
  }
  if (step_ == Step::kConnect) {
    // Which part stalled: the TCP handshake, the server's SSH greeting, or the key exchange.
    sockaddr_storage peer{};
    socklen_t length = sizeof peer;
    const int fd = session_ ? ssh_get_fd(session_) : -1;
    if (fd < 0 || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) {
      Fail(fmt::format("cannot connect to port {} within {} s (ssh.connect_timeout): no answer",
                       target_.port, timeout));
    }
    if (!ssh_get_serverbanner(session_)) {
      Fail(
          fmt::format("port {} accepted the connection but sent no SSH greeting within {} s "
                      "(ssh.connect_timeout): is an SSH server listening there?",
                      target_.port, timeout));
    }
    Fail(fmt::format("the SSH key exchange did not finish within {} s (ssh.connect_timeout)",
                     timeout));
  }
  Fail(fmt::format("no reply while authenticating within {} s (ssh.connect_timeout)", timeout));
}

void SshSession::Begin() {
  Resolve();
  session_ = ssh_new();
  if (!session_) Fail("cannot create a session (out of memory)");
  const bool no = false;
  const unsigned port = target_.port;
  // ssh_config.cpp read ~/.ssh/config already; libssh must not apply it a second time.
  ssh_options_set(session_, SSH_OPTIONS_PROCESS_CONFIG, &no);
  ssh_options_set(session_, SSH_OPTIONS_HOST, target_.address.c_str());
  ssh_options_set(session_, SSH_OPTIONS_PORT, &port);
  if (!target_.user.empty()) ssh_options_set(session_, SSH_OPTIONS_USER, target_.user.c_str());
  ssh_options_set(session_, SSH_OPTIONS_KNOWNHOSTS, known_hosts_.c_str());
  ssh_set_blocking(session_, 0);
  if (!target_.jumps.empty() && !tunnel_) {
    tunnel_ = OpenJumpTunnel(target_.jumps, target_.address, target_.port);
  }
  if (tunnel_) {
    socket_t fd = tunnel_->fd();
    BoundBlockingWrites(fd);
    ssh_options_set(session_, SSH_OPTIONS_FD, &fd);  // libssh owns and closes it from here
  }
  for (const std::string& file : target_.identity_files) credentials_.push_back({file, true});
  if (!target_.identities_only) {
    credentials_.push_back({"", false});  // ssh-agent
    for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"}) {
      credentials_.push_back({HomeDirectory() + "/.ssh/" + name, false});
    }
  }
  AdvanceConnect();  // creates the socket and sends the first packets
  if (!tunnel_) {
    EnableKeepalive(ssh_get_fd(session_));
    BoundBlockingWrites(ssh_get_fd(session_));
  }
}

bool SshSession::Advance() {
  if (step_ == Step::kConnect) {
    if (!AdvanceConnect()) return false;
    connected_ = true;
    VerifyHostKey();
    step_ = Step::kAuthenticate;
  }
  if (step_ == Step::kAuthenticate) {
    if (!AdvanceAuthentication()) return false;
    step_ = Step::kReady;
  }
  return true;
}

bool SshSession::AdvanceConnect() {
  const int rc = ssh_connect(session_);
  if (rc == SSH_AGAIN) return false;
  if (rc != SSH_OK) {
    FailFromTunnel();
    Fail(fmt::format("cannot connect to port {}: {}", target_.port, LastError()));
  }
  return true;
}

void SshSession::VerifyHostKey() {
  ssh_key server_key = nullptr;
  if (ssh_get_server_publickey(session_, &server_key) != SSH_OK) {
    Fail("the server sent no host key: " + LastError());
  }
  const std::string offered = Fingerprint(server_key);
  ssh_key_free(server_key);
  const ssh_known_hosts_e state = ssh_session_is_known_server(session_);
  switch (state) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER: {
      const std::string host = KnownHostsName(target_.address, target_.port);
      std::string expected;
      for (const std::string& fp : RecordedFingerprints(known_hosts_, host)) {
        expected += (expected.empty() ? "" : " or ") + fp;
      }
      Fail(fmt::format(
          "host key for {} has CHANGED: the server offers {}, which does not match {} (expected "
          "{}; someone may be intercepting the connection); if the change is expected, remove "
          "the old entry with `ssh-keygen -R '{}' -f {}` and connect again",
          target_.address, offered, known_hosts_,
          expected.empty() ? "an entry of another type" : expected, host, known_hosts_));
    }
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (target_.host_key_policy == HostKeyPolicy::kAcceptNew) {
        std::lock_guard<std::mutex> lock(known_hosts_write_mutex);
        if (ssh_session_update_known_hosts(session_) != SSH_OK) {
          Fail(fmt::format("cannot record host key {} in {}: {}", offered, known_hosts_,
                           LastError()));
        }
        return;
      }
      Fail(fmt::format(
          "host key for {} is not in {} (server offers {}); host_key_policy strict refuses "
          "unknown hosts: check the fingerprint and add it ({} >> {}), or set "
          "ssh.host_key_policy: accept-new",
          target_.address, known_hosts_, offered, KeyscanCommand(target_.address, target_.port),
          known_hosts_));
    case SSH_KNOWN_HOSTS_ERROR:
      break;
  }
  Fail(fmt::format("cannot check the host key against {}: {}", known_hosts_, LastError()));
}

bool SshSession::AdvanceAuthentication() {
  while (next_credential_ < credentials_.size()) {
    bool waiting = false;
    if (TryCredential(waiting)) return true;
    if (waiting) return false;
  }
  std::string list;
  for (const std::string& t : tried_) list += (list.empty() ? "" : ", ") + t;
  if (list.find("/.ssh/id_") == std::string::npos) list += ", no ~/.ssh/id_* key";
  Fail(
      fmt::format("authentication failed as {} (tried {}); password prompts are never used: "
                  "authorize one of these keys on the node or set ssh.identity_file",
                  target_.user.empty() ? "the current user" : target_.user, list));
}

bool SshSession::TryCredential(bool& waiting) {
  const Credential& c = credentials_[next_credential_];
  int rc;
  if (c.path.empty()) {
    const char* agent = std::getenv("SSH_AUTH_SOCK");
    if (!agent || !*agent) {
      tried_.push_back("ssh-agent (SSH_AUTH_SOCK not set)");
      ++next_credential_;
      return false;
    }
    rc = ssh_userauth_agent(session_, nullptr);
  } else {
    if (!key_) {
      if (!FileExists(c.path)) {
        if (c.named) tried_.push_back(fmt::format("identity_file {} (missing)", c.path));
        ++next_credential_;
        return false;
      }
      // No passphrase callback: an encrypted key fails here instead of prompting.
      if (ssh_pki_import_privkey_file(c.path.c_str(), nullptr, nullptr, nullptr, &key_) != SSH_OK) {
        key_ = nullptr;
        tried_.push_back(
            fmt::format("{} (unreadable or passphrase-protected; load it into ssh-agent)", c.path));
        ++next_credential_;
        return false;
      }
    }
    rc = ssh_userauth_publickey(session_, nullptr, key_);
  }
  if (rc == SSH_AUTH_AGAIN) {
    waiting = true;
    return false;
  }
  if (key_) {
    ssh_key_free(key_);
    key_ = nullptr;
  }
  if (rc == SSH_AUTH_SUCCESS) return true;
  if (rc == SSH_AUTH_ERROR) Fail("authentication failed: " + LastError());
  tried_.push_back(c.path.empty() ? "ssh-agent (no key accepted)"
                                  : fmt::format("{} (rejected)", c.path));
  ++next_credential_;
  return false;
}

}  // namespace dtrain
