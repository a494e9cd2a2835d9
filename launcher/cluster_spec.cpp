// Reads the cluster file (DESIGN.md "The cluster file") into a ClusterSpec. Every key is checked
// against the list of known keys; every error names FILE:LINE:COL and what was expected.
#include "launcher/cluster_spec.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "launcher/error.h"
#include "launcher/local_device_count.h"
#include "launcher/this_machine.h"
#include "launcher/yaml_reader.h"

namespace dtrain {
namespace {

// Reads the cluster file's keys; every value through YamlReader's checked, located readers.
class SpecReader : public YamlReader {
 public:
  using YamlReader::YamlReader;

  // Names as POSIX shells accept them ([A-Za-z_][A-Za-z0-9_]*: an ssh rank is started through
  // one); values without NUL (execve would cut them there).
  std::map<std::string, std::string> Env(const YAML::Node& node, const std::string& what) const {
    auto env = StringMap(node, what);
    for (const auto& item : node) {
      const std::string name = item.first.Scalar();
      bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
      for (unsigned char c : name) ok = ok && (std::isalnum(c) || c == '_') && c < 0x80;
      if (!ok) {
        Fail(item.first, fmt::format("{}: variable name '{}': expected letters, digits and '_', "
                                     "not starting with a digit",
                                     what, Printable(name)));
      }
      if (item.second.Scalar().find('\0') != std::string::npos) {
        Fail(item.second, fmt::format("{}.{}: the value holds a NUL byte, which no process "
                                      "environment can carry",
                                      what, name));
      }
    }
    return env;
  }

  // DTRAIN_PROBE_PEERS_PARTNERS (doctor/peer_plan.h): connections each node makes in a round
  // of the peer test, 2 or more.
  void CheckPeerPartners(const YAML::Node& env) const {
    const YAML::Node value = env[kPeerPartnersVariable];
    if (!value || ParsePeerPartners(value.Scalar()) != 0) return;
    Fail(value, fmt::format("env.{}: '{}': expected a whole number, {} or more (the connections "
                            "each node makes in a round of the health watch's peer test)",
                            kPeerPartnersVariable, Printable(value.Scalar()), kMinPeerPartners));
  }

  void ReadSsh(const YAML::Node& node, SshOptions& ssh) const {
    ExpectMap(node, "ssh",
              {"user", "port", "identity_file", "known_hosts", "host_key_policy", "connect_timeout",
               "config", "proxy_jump"});
    if (node["user"]) ssh.user = String(node["user"], "ssh.user");
    if (node["port"]) ssh.port = Port(node["port"], "ssh.port");
    ssh.port_given = static_cast<bool>(node["port"]);
    if (node["config"]) ssh.config = String(node["config"], "ssh.config");
    if (node["proxy_jump"]) {
      ssh.proxy_jump = String(node["proxy_jump"], "ssh.proxy_jump");
      if (ssh.proxy_jump.empty()) {
        Fail(node["proxy_jump"], "ssh.proxy_jump: expected [user@]host[:port][,...] or none");
      }
    }
    if (node["identity_file"])
      ssh.identity_file = String(node["identity_file"], "ssh.identity_file");
    if (node["known_hosts"]) ssh.known_hosts = String(node["known_hosts"], "ssh.known_hosts");
    if (const YAML::Node policy = node["host_key_policy"]) {
      ssh.host_key_policy_given = true;
      std::string value = String(policy, "ssh.host_key_policy");
      if (value == "strict") {
        ssh.host_key_policy = HostKeyPolicy::kStrict;
      } else if (value == "accept-new") {
        ssh.host_key_policy = HostKeyPolicy::kAcceptNew;
      } else {
        Fail(policy,
             fmt::format("ssh.host_key_policy: expected strict or accept-new, got '{}'", value));
      }
    }
    if (node["connect_timeout"]) {
      ssh.connect_timeout_given = true;
      ssh.connect_timeout_s = IntegerIn(node["connect_timeout"], "ssh.connect_timeout", 1, 3600);
    }
  }

  NodeSpec ReadNode(const YAML::Node& node, size_t index) const {
    const std::string what = fmt::format("nodes[{}]", index);
    ExpectMap(node, what, {"host", "address", "slots", "gpus", "env", "spare"});
    NodeSpec out;
    if (!node["host"]) Fail(node, what + ": missing 'host' (the node's name)");
    out.host = HostName(node["host"], what + ".host");
    out.address_given = static_cast<bool>(node["address"]);
    out.address = node["address"] ? HostName(node["address"], what + ".address") : out.host;
    if (node["slots"]) out.slots = IntegerIn(node["slots"], what + ".slots", 1, 4096);
    if (const YAML::Node gpus = node["gpus"]) {
      if (!gpus.IsSequence()) Fail(gpus, what + ".gpus: expected a list of GPU indices");
      std::set<int> seen;
      for (const auto& gpu : gpus) {
        int id = IntegerIn(gpu, what + ".gpus entry", 0, 1023);
        if (!seen.insert(id).second)
          Fail(gpu, fmt::format("{}.gpus: GPU {} listed twice", what, id));
        out.gpus.push_back(id);
      }
    }
    if (node["env"]) out.env = Env(node["env"], what + ".env");
    if (node["spare"]) out.spare = Bool(node["spare"], what + ".spare");
    return out;
  }

  void ReadNodes(const YAML::Node& node, ClusterSpec& spec) const {
    if (!node.IsSequence()) Fail(node, "nodes: expected a list of {host: NAME, slots: N} maps");
    if (node.size() == 0) Fail(node, "nodes: expected at least one node");
    std::map<std::string, YAML::Mark> hosts;
    size_t index = 0;
    long long total_ranks = 0;
    for (const auto& item : node) {
      NodeSpec n = ReadNode(item, index++);
      auto [it, fresh] = hosts.emplace(n.host, item["host"].Mark());
      if (!fresh) {
        Fail(item["host"], fmt::format("duplicate host '{}' (first listed at line {})", n.host,
                                       it->second.line + 1));
      }
      total_ranks += n.slots;
      if (total_ranks > kMaxRanks) {
        Fail(item, fmt::format("nodes: more than {} ranks in all; a cluster that large is not "
                               "what dtrain launches",
                               kMaxRanks));
      }
      spec.nodes.push_back(std::move(n));
    }
    if (std::all_of(spec.nodes.begin(), spec.nodes.end(),
                    [](const NodeSpec& n) { return n.spare; })) {
      Fail(node, "nodes: every node is a spare (spare: true); at least one must run the job");
    }
  }

  void ReadJob(const YAML::Node& node, JobSpec& job) const {
    ExpectMap(node, "job",
              {"command", "max_restarts", "timeline", "stall_timeout", "horovod", "node_timeout",
               "role", "straggler_factor", "on_straggler", "hold_back"});
    if (node["command"]) {
      job.command = StringList(node["command"], "job.command");
      if (job.command.empty()) Fail(node["command"], "job.command: expected a non-empty list");
    }
    if (node["max_restarts"]) {
      job.max_restarts = IntegerIn(node["max_restarts"], "job.max_restarts", 0, 1000);
    }
    if (node["timeline"]) job.timeline = Bool(node["timeline"], "job.timeline");
    if (node["stall_timeout"]) {
      job.stall_timeout_s = IntegerIn(node["stall_timeout"], "job.stall_timeout", 0, 7 * 86400);
    }
    if (node["horovod"]) job.horovod = Bool(node["horovod"], "job.horovod");
    if (node["node_timeout"]) {
      job.node_timeout_s = IntegerIn(node["node_timeout"], "job.node_timeout", 0, 86400);
      if (job.node_timeout_s == 1)
        Fail(node["node_timeout"], "job.node_timeout: expected 0 (off) or seconds >= 2");
    }
    if (node["hold_back"]) {
      job.hold_back_s = IntegerIn(node["hold_back"], "job.hold_back", 0, 365 * 86400);
    }
    if (node["straggler_factor"]) {
      const std::string text = String(node["straggler_factor"], "job.straggler_factor");
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(value == 0 || (value > 1 && value <= 1000))) {
        Fail(node["straggler_factor"],
             fmt::format("job.straggler_factor: expected 0 (off) or a factor above 1 such as 1.5, "
                         "got '{}'",
                         Printable(text)));
      }
      job.straggler_factor = value;
    }
    if (node["on_straggler"]) {
      job.on_straggler = String(node["on_straggler"], "job.on_straggler");
      if (job.on_straggler != "report" && job.on_straggler != "leave") {
        Fail(node["on_straggler"],
             fmt::format("job.on_straggler: expected report or leave, got '{}'",
                         Printable(job.on_straggler)));
      }
    }
    if (node["role"]) {
      job.role = String(node["role"], "job.role");
      if (job.role.empty()) Fail(node["role"], "job.role: expected a non-empty name");
    }
  }

  void ReadSlurm(const YAML::Node& node, SlurmSpec& slurm) const {
    ExpectMap(node, "slurm", {"partition", "time", "account", "options"});
    if (node["partition"]) slurm.partition = String(node["partition"], "slurm.partition");
    if (node["time"]) slurm.time = String(node["time"], "slurm.time");
    if (node["account"]) slurm.account = String(node["account"], "slurm.account");
    if (node["options"]) slurm.extra = StringMap(node["options"], "slurm.options");
  }

  // health_checks: a list of {name, run, timeout, severity, fix}; names unique.
  void ReadHealthChecks(const YAML::Node& node, std::vector<HealthCheckSpec>& checks) const {
    if (!node.IsSequence()) {
      Fail(node, "health_checks: expected a list of {name: NAME, run: COMMAND} maps");
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node item = node[i];
      const std::string what = fmt::format("health_checks[{}]", i);
      ExpectMap(item, what, {"name", "run", "timeout", "severity", "fix"});
      if (!item["name"]) Fail(item, what + ": missing 'name'");
      if (!item["run"]) Fail(item, what + ": missing 'run' (the command, run with sh -c)");
      HealthCheckSpec check;
      check.name = HostName(item["name"], what + ".name");
      for (const HealthCheckSpec& other : checks) {
        if (other.name == check.name) {
          Fail(item["name"],
               fmt::format("{}.name: '{}' is already the name of another check", what, check.name));
        }
      }
      check.run = String(item["run"], what + ".run");
      if (check.run.find_first_not_of(" \t\n") == std::string::npos) {
        Fail(item["run"], what + ".run: expected a command");
      }
      if (check.run.find('\0') != std::string::npos) {
        Fail(item["run"], what + ".run: the command holds a NUL byte");
      }
      if (item["timeout"]) {
        check.timeout_s =
            IntegerIn(item["timeout"], what + ".timeout (seconds)", 1, kMaxHealthCheckSeconds);
      }
      if (const YAML::Node severity = item["severity"]) {
        const std::string value = String(severity, what + ".severity");
        if (value != "error" && value != "warning") {
          Fail(severity, fmt::format("{}.severity: expected error or warning, got '{}'", what,
                                     Printable(value)));
        }
        check.warning = value == "warning";
      }
      if (item["fix"]) check.fix = String(item["fix"], what + ".fix");
      checks.push_back(std::move(check));
    }
  }

  ClusterSpec Read(const YAML::Node& root) const {
    ClusterSpec spec;
    spec.source = origin();
    if (!root.IsDefined() || root.IsNull()) {
      throw UsageError(origin() + ":1:1: the cluster file is empty; expected a map with 'nodes'");
    }
    ExpectMap(root, "the cluster file",
              {"name", "transport", "ssh", "nodes", "rendezvous", "workdir", "python", "env",
               "env_file", "expect", "log_dir", "health_checks", "job", "slurm"});
    if (root["name"]) spec.name = String(root["name"], "name");
    if (const YAML::Node t = root["transport"]) {
      spec.transport_given = true;
      std::string value = String(t, "transport");
      if (value == "ssh") {
        spec.transport = TransportKind::kSsh;
      } else if (value == "local") {
        spec.transport = TransportKind::kLocal;
      } else if (value == "slurm") {
        spec.transport = TransportKind::kSlurm;
      } else {
        Fail(t, fmt::format("transport: expected ssh, local or slurm, got '{}'", value));
      }
    }
    if (root["ssh"]) ReadSsh(root["ssh"], spec.ssh);
    if (!root["nodes"]) Fail(root, "missing 'nodes': expected a list of {host: NAME, slots: N}");
    ReadNodes(root["nodes"], spec);
    if (!spec.transport_given) {
      bool all_here = true;
      for (const NodeSpec& node : spec.nodes) all_here = all_here && IsThisMachine(node.address);
      if (all_here) spec.transport = TransportKind::kLocal;
    }
    if (const YAML::Node r = root["rendezvous"]) {
      ExpectMap(r, "rendezvous", {"port"});
      if (r["port"]) {
        spec.rendezvous_port = Port(r["port"], "rendezvous.port");
        spec.rendezvous_port_given = true;
      }
    }
    if (root["workdir"]) spec.workdir = String(root["workdir"], "workdir");
    if (root["python"]) spec.python = String(root["python"], "python");
    if (root["env"]) {
      spec.env = Env(root["env"], "env");
      CheckPeerPartners(root["env"]);
    }
    if (root["env_file"]) {
      spec.env_file = String(root["env_file"], "env_file");
      if (spec.env_file.empty()) Fail(root["env_file"], "env_file: expected a file name");
      const size_t slash = origin().rfind('/');
      if (spec.env_file[0] != '/' && spec.env_file[0] != '~' && slash != std::string::npos) {
        spec.env_file = origin().substr(0, slash + 1) + spec.env_file;
      }
    }
    if (const YAML::Node e = root["expect"]) {
      ExpectMap(e, "expect", {"cuda", "nccl", "python", "torch", "horovod", "driver"});
      spec.expect = StringMap(e, "expect");
    }
    if (root["log_dir"]) {
      spec.log_dir = String(root["log_dir"], "log_dir");
      if (spec.log_dir.empty()) Fail(root["log_dir"], "log_dir: expected a directory");
    }
    if (root["health_checks"]) ReadHealthChecks(root["health_checks"], spec.health_checks);
    if (root["job"]) ReadJob(root["job"], spec.job);
    if (root["slurm"]) ReadSlurm(root["slurm"], spec.slurm);
    return spec;
  }
};

}  // namespace

size_t ParsePeerPartners(const std::string& text) {
  const bool digits =
      !text.empty() && text.size() <= 6 &&
      std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
  if (!digits) return 0;
  const size_t partners = std::stoul(text);
  return partners >= kMinPeerPartners ? partners : 0;
}

ClusterSpec ParseClusterText(const std::string& text, const std::string& origin) {
  SpecReader reader(origin);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp words this as "bad file"; a cluster file is a few levels deep.
    throw UsageError(
        fmt::format("{}: not valid YAML: nested more than {} levels deep (the YAML "
                    "reader's limit)",
                    reader.Where(e.mark), e.depth()));
  } catch (const YAML::Exception& e) {
    throw UsageError(reader.Where(e.mark) + ": not valid YAML: " + e.msg);
  }
  try {
    return reader.Read(root);
  } catch (const YAML::Exception& e) {
    throw UsageError(reader.Where(e.mark) + ": " + e.msg);
  }
}

ClusterSpec ParseClusterFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    throw UsageError(path + ": is a directory; expected a cluster file (YAML)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot read the cluster file: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseClusterText(text.str(), path);
}

std::string DefaultClusterFile() {
  struct stat st;
  return ::stat("cluster.yaml", &st) == 0 ? "cluster.yaml" : "";
}

ClusterSpec LoadClusterOrDefault(const std::string& path) {
  const std::string file = path.empty() ? DefaultClusterFile() : path;
  return file.empty() ? DefaultLocalCluster() : ParseClusterFile(file);
}

ClusterSpec DefaultLocalCluster() {
  int slots = 1;
  if (const char* nproc = std::getenv("NPROC_PER_NODE"); nproc && *nproc) {
    char* end = nullptr;
    long value = std::strtol(nproc, &end, 10);
    if (*end != '\0' || value < 1 || value > 4096) {
      throw UsageError(fmt::format("NPROC_PER_NODE={}: expected a positive integer", nproc));
    }
    slots = static_cast<int>(value);
  } else if (const char* devices = std::getenv("CUDA_VISIBLE_DEVICES"); devices && *devices) {
    slots = std::max(1, VisibleGpuCount(devices, -1));  // as CUDA counts: up to a bad entry
  }
  ClusterSpec spec;
  spec.source = "<builtin local>";
  spec.name = "local";
  spec.transport = TransportKind::kLocal;
  NodeSpec node;
  node.host = "localhost";
  node.address = "127.0.0.1";
  node.slots = slots;
  spec.nodes.push_back(node);
  return spec;
}

const char* TransportName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kSsh:
      return "ssh";
    case TransportKind::kLocal:
      return "local";
    case TransportKind::kSlurm:
      return "slurm";
  }
  return "unknown";
}

}  // namespace dtrain
