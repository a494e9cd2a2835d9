// SshConfig: the OpenSSH client configuration (ssh_config(5)) for the keys dtrain acts on, and
// SshTarget, everything one connection needs once the cluster file and that configuration are
// merged. The cluster file's explicit keys win; then the first value the config gives (as ssh
// does); then dtrain's defaults. A node listed only as `host: gpu-a` connects as `ssh gpu-a` would.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

// What a config file says for one host name; unset fields were not said.
struct SshHostSettings {
  std::optional<std::string> hostname;
  std::optional<std::string> user;
  std::optional<int> port;
  std::vector<std::string> identity_files;  // every IdentityFile line that applies, in order
  std::optional<bool> identities_only;
  std::optional<std::string> known_hosts;      // the first UserKnownHostsFile entry
  std::optional<std::string> strict_checking;  // StrictHostKeyChecking as written, lower case
  std::optional<int> connect_timeout_s;
  std::optional<std::string> proxy_jump;  // as written; "none" kept as "none"
};

// Reads `path` (Include followed) for `host`; `user` is the cluster file's user for it, if any
// (what `Match user` sees first). A missing file says nothing; a malformed line throws
// Error("FILE:LINE: ..."). Match supports host, originalhost, user, localuser, exec, all, final
// and canonical, negated or not; blocks under other criteria (localnetwork, tagged, ...) are
// skipped.
SshHostSettings ReadSshConfig(const std::string& path, const std::string& host,
                              const std::string& user = "");

// The config file to read for these options: ssh.config, else ~/.ssh/config; "" for none.
std::string SshConfigPath(const SshOptions& options);

// One connection: where, as whom, with which keys and host key rules; `jumps` are the bastions
// to pass through, first one reached directly.
struct SshTarget {
  std::string role = "node";  // "node" or "bastion", for messages
  std::string name;           // the node's (or bastion's) name as written
  std::string address;        // what to connect to (seen from the last bastion, if any)
  int port = 22;
  std::string user;                         // "" = the current user
  std::vector<std::string> identity_files;  // explicit ones, tried before the agent
  bool identities_only = false;             // no agent, no default ~/.ssh/id_* keys
  std::string known_hosts;                  // expanded path
  HostKeyPolicy host_key_policy = HostKeyPolicy::kStrict;
  int connect_timeout_s = 10;
  std::vector<SshTarget> jumps;

  // "node gpu-a (10.0.0.11)", "node gpu-a (10.0.0.11 via bastion)", "bastion bastion (1.2.3.4)".
  std::string Where() const;
};

// Merges node, cluster file options and the config file. Throws Error naming the config file
// and line for a malformed config, or the ssh.proxy_jump value for a malformed jump list.
SshTarget ResolveSshTarget(const NodeSpec& node, const SshOptions& options);

// For ssh clusters: each node without `address:` gets its config HostName, so MASTER_ADDR and
// reports name the machine ssh really reaches. Reads the config once per node.
void ApplySshConfigAddresses(ClusterSpec& spec);

}  // namespace dtrain
