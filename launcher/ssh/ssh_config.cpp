// ssh_config(5) for dtrain's keys. libssh has a parser (ssh_options_parse_config), but it applies
// what it reads to a session and hands little of it back: dtrain needs the values themselves
// (HostName for MASTER_ADDR, every IdentityFile and IdentitiesOnly for its own credential order,
// the known_hosts path and StrictHostKeyChecking for its own host key rules and messages,
// ConnectTimeout for its event loop's deadlines, ProxyJump to open its own tunnels; libssh 0.10
// would turn ProxyJump into an `ssh -W` subprocess). So this reads the same file format:
// `Key value` or `Key=value`, keys case-insensitive, "quoted values", Host pattern lists with
// * ? and !negation, first value wins (IdentityFile accumulates), Include with globs.
#include "launcher/ssh/ssh_config.h"

#include <fnmatch.h>
#include <glob.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/subprocess.h"
#include "launcher/ssh/ssh_session.h"

namespace dtrain {
namespace {

constexpr int kMaxIncludeDepth = 8;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string LocalUser() {
  if (const passwd* pw = getpwuid(getuid())) return pw->pw_name;
  return "";
}

// Splits a config line into words: whitespace or one '=' between key and value, "quotes" kept
// together.
std::vector<std::string> Words(const std::string& line, bool& bad_quote) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false, quoted = false;
  bad_quote = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        quoted = false;
      } else {
        word += c;
      }
    } else if (c == '"') {
      quoted = in_word = true;
    } else if (std::isspace(static_cast<unsigned char>(c)) || (c == '=' && words.empty())) {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quoted) bad_quote = true;
  if (in_word) words.push_back(word);
  return words;
}

// A pattern list (a Host line's words, or a Match criterion's comma-separated list): any
// positive match and no negated match.
bool PatternsMatch(const std::vector<std::string>& patterns, size_t first,
                   const std::string& host) {
  bool matched = false;
  for (size_t i = first; i < patterns.size(); ++i) {
    const std::string& p = patterns[i];
    const bool negated = !p.empty() && p[0] == '!';
    if (fnmatch((negated ? p.substr(1) : p).c_str(), host.c_str(), 0) != 0) continue;
    if (negated) return false;
    matched = true;
  }
  return matched;
}

bool PatternListMatches(const std::string& list, const std::string& name) {
  std::vector<std::string> patterns;
  std::stringstream in(list);
  for (std::string p; std::getline(in, p, ',');) {
    if (!p.empty()) patterns.push_back(p);
  }
  return PatternsMatch(patterns, 0, name);
}

bool YesNo(const std::string& value, const std::string& where) {
  const std::string v = Lower(value);
  if (v == "yes" || v == "true") return true;
  if (v == "no" || v == "false") return false;
  throw Error(fmt::format("{}: expected yes or no, got '{}'", where, value));
}

// What ssh_config(5)'s % tokens stand for.
struct PercentTokens {
  std::string host;           // %h
  std::string original_host;  // %n: the name as written
  int port = 22;              // %p
  std::string remote_user;    // %r; "" = the local user
};

// Expands %h %n %p %r %u (the local user) %l (this machine's name) %d (home) and %%. A token it
// does not know is kept as written and, when `unknown` is given, reported there.
std::string ExpandPercentTokens(const std::string& text, const PercentTokens& tokens,
                                char* unknown = nullptr) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    char local_host[256] = {};
    switch (const char token = text[++i]) {
      case 'h':
        out += tokens.host;
        break;
      case 'n':
        out += tokens.original_host;
        break;
      case 'p':
        out += std::to_string(tokens.port);
        break;
      case 'r':
        out += tokens.remote_user.empty() ? LocalUser() : tokens.remote_user;
        break;
      case 'u':
        out += LocalUser();
        break;
      case 'l':
        ::gethostname(local_host, sizeof local_host - 1);
        out += local_host;
        break;
      case 'd':
        out += ExpandHome("~");
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += token;
        if (unknown && !*unknown) *unknown = token;
    }
  }
  return out;
}

class ConfigReader {
 public:
  ConfigReader(std::string host, std::string user, SshHostSettings& out)
      : host_(std::move(host)), user_(std::move(user)), out_(out) {}

  void ReadFile(const std::string& path, int depth) {
    std::ifstream in(path);
    if (!in) return;  // like ssh: a missing config says nothing
    // Each file starts matching (ssh: an Include inside a Host block keeps that block's state;
    // a top-level file starts as if under `Host *`).
    const bool saved = active_;
    if (depth == 0) active_ = true;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      ReadLine(line, fmt::format("{}:{}", path, number), depth);
    }
    if (depth == 0) active_ = saved;
  }

 private:
  // A Match line: every criterion (optionally negated with '!') must hold. As ssh evaluates
  // them: `host` against the HostName given so far (else the name), `originalhost` against the
  // name, `user` against the remote user (the cluster file's, else the config's so far, else the
  // local one), `localuser`, `all`, `final` (dtrain reads the file once, as the final pass),
  // `canonical` (dtrain does not canonicalise: never), `exec` (the command, tokens expanded, run
  // by /bin/sh; exit 0 holds). Other criteria (localnetwork, tagged, ...) never match, so their
  // blocks are skipped.
  bool MatchLine(const std::vector<std::string>& words, const std::string& where) {
    if (words.size() < 2) throw Error(where + ": Match needs criteria, e.g. `Match host gpu-*`");
    bool all_hold = true;
    for (size_t i = 1; i < words.size(); ++i) {
      std::string criterion = Lower(words[i]);
      const bool negated = !criterion.empty() && criterion[0] == '!';
      if (negated) criterion.erase(0, 1);
      bool holds = false;
      if (criterion == "all" || criterion == "final") {
        holds = true;
      } else if (criterion == "canonical") {
        holds = false;
      } else {
        if (i + 1 >= words.size()) {
          throw Error(fmt::format("{}: Match {} needs a value", where, criterion));
        }
        const std::string& list = words[++i];
        if (criterion == "host") {
          holds = PatternListMatches(list, TokensSoFar().host);
        } else if (criterion == "originalhost") {
          holds = PatternListMatches(list, host_);
        } else if (criterion == "user") {
          holds =
              PatternListMatches(list, !user_.empty() ? user_ : out_.user.value_or(LocalUser()));
        } else if (criterion == "localuser") {
          holds = PatternListMatches(list, LocalUser());
        } else if (criterion == "exec") {
          holds = all_hold && ExecSucceeds(list, where);  // run only while the line still holds
        }
      }
      all_hold = all_hold && (holds != negated);
    }
    return all_hold;
  }

  // Match exec: `command` with %h %n %p %r %u %l %% expanded, run by /bin/sh with stdin and
  // stdout on /dev/null (its stderr is dtrain's), as ssh runs it; at most 10 s.
  bool ExecSucceeds(const std::string& command, const std::string& where) {
    char unknown = 0;
    const std::string expanded = ExpandPercentTokens(command, TokensSoFar(), &unknown);
    if (unknown) {
      throw Error(
          fmt::format("{}: Match exec: unknown token %{} (dtrain expands %h %n %p %r "
                      "%u %l %d %%)",
                      where, unknown));
    }
    SubprocessOptions options;
    options.argv = {"/bin/sh", "-c", expanded};
    options.out = Stdio::kNull;
    options.err = Stdio::kInherit;
    Subprocess child;
    if (std::string why = child.Start(options); !why.empty()) {
      throw Error(fmt::format("{}: Match exec: cannot run /bin/sh: {}", where, why));
    }
    for (int waited_ms = 0; !child.Done(); waited_ms += 10) {
      if (waited_ms >= 10000) {
        child.SignalGroup(SIGKILL);
        child.Finish();
        throw Error(fmt::format("{}: Match exec \"{}\" did not finish within 10 s", where,
                                expanded));
      }
      ::usleep(10000);
    }
    return child.status().ok();
  }

  // The tokens as they stand at this line: %h is the HostName given so far (else the name).
  PercentTokens TokensSoFar() const {
    PercentTokens tokens;
    tokens.original_host = host_;
    tokens.host = host_;
    tokens.port = out_.port.value_or(22);
    tokens.remote_user = !user_.empty() ? user_ : out_.user.value_or("");
    if (out_.hostname) tokens.host = ExpandPercentTokens(*out_.hostname, tokens);
    return tokens;
  }

  void ReadLine(const std::string& line, const std::string& where, int depth) {
    bool bad_quote = false;
    std::vector<std::string> words = Words(line, bad_quote);
    if (bad_quote) throw Error(where + ": unterminated quote");
    if (words.empty() || words[0][0] == '#') return;
    const std::string key = Lower(words[0]);
    if (key == "host") {
      active_ = PatternsMatch(words, 1, host_);
      return;
    }
    if (key == "match") {
      active_ = MatchLine(words, where);
      return;
    }
    if (!active_) return;
    if (words.size() < 2) throw Error(fmt::format("{}: {} needs a value", where, words[0]));
    const std::string& value = words[1];
    if (key == "include") {
      if (depth >= kMaxIncludeDepth) throw Error(where + ": Include nested too deeply");
      for (size_t i = 1; i < words.size(); ++i) Include(words[i], depth);
    } else if (key == "hostname") {
      Set(out_.hostname, value);
    } else if (key == "user") {
      Set(out_.user, value);
    } else if (key == "port") {
      char* end = nullptr;
      const long port = std::strtol(value.c_str(), &end, 10);
      if (*end || port < 1 || port > 65535) {
        throw Error(fmt::format("{}: Port: expected 1..65535, got '{}'", where, value));
      }
      Set(out_.port, static_cast<int>(port));
    } else if (key == "identityfile") {
      if (Lower(value) != "none") out_.identity_files.push_back(value);
    } else if (key == "identitiesonly") {
      Set(out_.identities_only, YesNo(value, where + ": IdentitiesOnly"));
    } else if (key == "userknownhostsfile") {
      Set(out_.known_hosts, value);
    } else if (key == "stricthostkeychecking") {
      Set(out_.strict_checking, Lower(value));
    } else if (key == "connecttimeout") {
      char* end = nullptr;
      const long seconds = std::strtol(value.c_str(), &end, 10);
      if (*end || seconds < 1) {
        throw Error(
            fmt::format("{}: ConnectTimeout: expected seconds >= 1, got '{}'", where, value));
      }
      Set(out_.connect_timeout_s, static_cast<int>(seconds));
    } else if (key == "proxyjump") {
      Set(out_.proxy_jump, value);
    }
    // Every other key (ForwardAgent, ServerAliveInterval, ...) is ssh's business, not dtrain's.
  }

  template <typename T, typename V>
  static void Set(std::optional<T>& field, V value) {
    if (!field) field = std::move(value);  // the first value obtained wins
  }

  void Include(const std::string& pattern, int depth) {
    std::string path = ExpandHome(pattern);
    if (path.empty() || path[0] != '/') path = ExpandHome("~/.ssh/" + path);
    glob_t found{};
    if (glob(path.c_str(), 0, nullptr, &found) == 0) {
      for (size_t i = 0; i < found.gl_pathc; ++i) ReadFile(found.gl_pathv[i], depth + 1);
    }
    globfree(&found);
  }

  std::string host_;
  std::string user_;  // the cluster file's user for this host, if it gives one
  SshHostSettings& out_;
  bool active_ = true;
};

// The tokens in HostName, IdentityFile and UserKnownHostsFile (%h is the name as written).
std::string ExpandTokens(const std::string& text, const SshTarget& target,
                         const std::string& original_host) {
  return ExpandHome(
      ExpandPercentTokens(text, {original_host, original_host, target.port, target.user}));
}

// One ProxyJump entry: [user@]host[:port] or ssh://[user@]host[:port].
struct JumpSpec {
  std::string user, host;
  int port = 0;  // 0: not given
};

std::vector<JumpSpec> ParseJumps(const std::string& list, const std::string& where) {
  std::vector<JumpSpec> jumps;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    JumpSpec jump;
    if (item.rfind("ssh://", 0) == 0) item = item.substr(6);
    if (auto at = item.rfind('@'); at != std::string::npos) {
      jump.user = item.substr(0, at);
      item = item.substr(at + 1);
    }
    if (auto colon = item.rfind(':');
        colon != std::string::npos && item.find(']') == std::string::npos) {
      char* end = nullptr;
      const long port = std::strtol(item.c_str() + colon + 1, &end, 10);
      if (*end || port < 1 || port > 65535) {
        throw Error(fmt::format("{}: bad port in jump host '{}'", where, item));
      }
      jump.port = static_cast<int>(port);
      item = item.substr(0, colon);
    }
    if (item.size() > 2 && item.front() == '[' && item.back() == ']')
      item = item.substr(1, item.size() - 2);
    if (item.empty()) {
      throw Error(fmt::format("{}: expected [user@]host[:port][,...], got '{}'", where, list));
    }
    jump.host = item;
    jumps.push_back(jump);
  }
  if (jumps.empty()) throw Error(fmt::format("{}: expected [user@]host[:port][,...]", where));
  return jumps;
}

HostKeyPolicy PolicyFrom(const std::string& strict, const std::string& where) {
  // dtrain never prompts and never lets a changed key through: "ask" is strict, "no" and "off"
  // accept unknown keys only (as accept-new).
  if (strict == "yes" || strict == "ask") return HostKeyPolicy::kStrict;
  if (strict == "accept-new" || strict == "no" || strict == "off") return HostKeyPolicy::kAcceptNew;
  throw Error(fmt::format(
      "{}: StrictHostKeyChecking: expected yes, ask, accept-new or no, got '{}'", where, strict));
}

// The target for `name` with config settings applied under the cluster file's explicit keys.
SshTarget Resolve(const std::string& name, const std::string& explicit_address,
                  const SshOptions& options, const std::string& config_path, bool for_node) {
  SshHostSettings config;
  if (!config_path.empty()) config = ReadSshConfig(config_path, name, options.user);
  SshTarget t;
  t.role = for_node ? "node" : "bastion";
  t.name = name;
  t.port = options.port_given ? options.port : config.port.value_or(options.port);
  t.user = !options.user.empty() ? options.user : config.user.value_or("");
  t.address = !explicit_address.empty() ? explicit_address
              : config.hostname         ? ExpandTokens(*config.hostname, t, name)
                                        : name;
  if (!options.identity_file.empty()) t.identity_files.push_back(ExpandHome(options.identity_file));
  for (const std::string& file : config.identity_files) {
    t.identity_files.push_back(ExpandTokens(file, t, name));
  }
  t.identities_only = config.identities_only.value_or(false);
  t.known_hosts = !options.known_hosts.empty() ? ExpandHome(options.known_hosts)
                  : config.known_hosts         ? ExpandTokens(*config.known_hosts, t, name)
                                               : ExpandHome("~/.ssh/known_hosts");
  t.host_key_policy = options.host_key_policy;
  if (!options.host_key_policy_given && config.strict_checking) {
    t.host_key_policy = PolicyFrom(*config.strict_checking, config_path + ": host " + name);
  }
  t.connect_timeout_s = options.connect_timeout_given
                            ? options.connect_timeout_s
                            : config.connect_timeout_s.value_or(options.connect_timeout_s);
  if (!for_node) return t;

  std::string jumps = options.proxy_jump;
  std::string jumps_from = "ssh.proxy_jump";
  if (jumps.empty() && config.proxy_jump) {
    jumps = *config.proxy_jump;
    jumps_from = config_path + ": ProxyJump for " + name;
  }
  if (jumps.empty() || Lower(jumps) == "none") return t;
  for (const JumpSpec& jump : ParseJumps(jumps, jumps_from)) {
    SshOptions hop_options = options;
    hop_options.user = jump.user;
    hop_options.port_given = jump.port != 0;
    if (jump.port != 0) hop_options.port = jump.port;
    SshTarget hop = Resolve(jump.host, "", hop_options, config_path, false);
    if (hop.user.empty() && jump.user.empty()) hop.user = options.user;
    t.jumps.push_back(std::move(hop));
  }
  return t;
}

}  // namespace

SshHostSettings ReadSshConfig(const std::string& path, const std::string& host,
                              const std::string& user) {
  SshHostSettings settings;
  ConfigReader(host, user, settings).ReadFile(path, 0);
  return settings;
}

std::string SshConfigPath(const SshOptions& options) {
  if (options.config == "none") return "";
  return ExpandHome(options.config.empty() ? "~/.ssh/config" : options.config);
}

std::string SshTarget::Where() const {
  std::string via;
  for (const SshTarget& jump : jumps) via += (via.empty() ? " via " : ", ") + jump.name;
  return fmt::format("{} {} ({}{})", role, name, address, via);
}

SshTarget ResolveSshTarget(const NodeSpec& node, const SshOptions& options) {
  const std::string path = SshConfigPath(options);
  if (!options.config.empty() && options.config != "none" && access(path.c_str(), R_OK) != 0) {
    throw Error(fmt::format("ssh.config: cannot read {} (give an existing file, or `none`)", path));
  }
  const std::string address =
      node.address_given || (node.address != node.host && !node.address.empty()) ? node.address
                                                                                 : "";
  return Resolve(node.host, address, options, path, true);
}

void ApplySshConfigAddresses(ClusterSpec& spec) {
  if (spec.transport != TransportKind::kSsh) return;
  const std::string path = SshConfigPath(spec.ssh);
  if (path.empty()) return;
  for (NodeSpec& node : spec.nodes) {
    if (node.address_given || node.address != node.host) continue;
    const SshHostSettings config = ReadSshConfig(path, node.host, spec.ssh.user);
    if (!config.hostname) continue;
    SshTarget t;
    t.port = config.port.value_or(spec.ssh.port);
    node.address = ExpandTokens(*config.hostname, t, node.host);
  }
}

}  // namespace dtrain
