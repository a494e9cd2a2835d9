// Reads top to bottom in the order the choices apply: nodes, ranks per node, total ranks,
// environment, rendezvous.
#include "launcher/cluster_choice.h"

#include <cstdlib>

#include <fmt/format.h>

#include "launcher/env_file.h"
#include "launcher/error.h"
#include "launcher/horovodrun_config_file.h"
#include "launcher/horovodrun_options.h"
#include "launcher/host_list.h"
#include "launcher/local_device_count.h"
#include "launcher/ssh/ssh_config.h"
#include "launcher/ssh/ssh_session.h"
#include "launcher/this_machine.h"
#include "launcher/torchrun_rendezvous.h"

namespace dtrain {
namespace {

constexpr int kDefaultRendezvousPort = 29500;
// torchrun's c10d rendezvous backend's port, where --rdzv-endpoint names none.
constexpr int kTorchrunC10dPort = 29400;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool AllHere(const std::vector<NodeSpec>& nodes) {
  for (const NodeSpec& node : nodes) {
    if (!IsThisMachine(node.address)) return false;
  }
  return true;
}

// -H or --hostfile: default ssh settings, or the ones of -c FILE when both are given. A listed
// node the cluster file also names (by host or address, as `dtrain doctor --exclude-bad` writes
// addresses) keeps the file's settings for it (env, gpus, address, spare), with the list's slots.
void UseHostNodes(const ClusterChoice& choice, ChosenCluster& out) {
  const std::vector<NodeSpec> known = out.spec.nodes;  // the cluster file's, if any
  out.spec.nodes =
      choice.hosts.empty() ? ParseHostfile(choice.hostfile) : ParseHostList(choice.hosts);
  for (NodeSpec& node : out.spec.nodes) {
    for (const NodeSpec& file_node : known) {
      if (file_node.host != node.host && file_node.address != node.address &&
          file_node.address != node.host)
        continue;
      const int slots = node.slots;
      node = file_node;
      node.slots = slots;
      break;
    }
  }
  out.source = !choice.hostfile.empty() ? "hostfile " + choice.hostfile
               : choice.hosts_discovered
                   ? "the hosts --host-discovery-script lists, " + choice.hosts
                   : "-H " + choice.hosts;
  if (!choice.cluster_file.empty()) out.source += " with the settings of " + choice.cluster_file;
  if (!out.spec.transport_given) {
    out.spec.transport = AllHere(out.spec.nodes) ? TransportKind::kLocal : TransportKind::kSsh;
  }
  out.ranks_why = !choice.hostfile.empty()  ? "slots in the hostfile"
                  : choice.hosts_discovered ? "slots the script lists"
                                            : "slots in -H";
}

void ChooseNodes(const ClusterChoice& choice, ChosenCluster& out) {
  if (!choice.hosts.empty() && !choice.hostfile.empty()) {
    throw UsageError("-H and --hostfile both list nodes; give one of them");
  }
  const bool host_nodes = !choice.hosts.empty() || !choice.hostfile.empty();
  const bool standalone = choice.torchrun.standalone;
  if (standalone && (host_nodes || !choice.cluster_file.empty())) {
    throw UsageError(fmt::format(
        "--standalone runs the job on this machine alone, as torchrun's does; leave out {} to "
        "run here, or leave out --standalone to run on the nodes",
        !choice.cluster_file.empty() ? "-c"
        : choice.hosts.empty()       ? "--hostfile"
                                     : "-H"));
  }
  if (standalone && !DefaultClusterFile().empty()) {
    out.notes.push_back(
        "./cluster.yaml is not used: --standalone runs the job on this machine alone");
  }
  if (!choice.cluster_file.empty() ||
      (!host_nodes && !standalone && !DefaultClusterFile().empty())) {
    out.spec = LoadClusterOrDefault(choice.cluster_file);
    const std::string shown = choice.cluster_file.empty() ? "./cluster.yaml" : choice.cluster_file;
    out.source = "cluster file " + shown;
    out.ranks_why = "slots in " + shown;
  } else if (!host_nodes) {
    out.spec = DefaultLocalCluster();
    out.source = standalone ? "--standalone (this machine)" : "no cluster file (this machine)";
    const std::string nproc = Env("NPROC_PER_NODE");
    const std::string devices = Env("CUDA_VISIBLE_DEVICES");
    out.ranks_why = !nproc.empty()     ? "NPROC_PER_NODE=" + nproc
                    : !devices.empty() ? "the devices in CUDA_VISIBLE_DEVICES=" + devices
                                       : "the default";
    return;
  }
  if (host_nodes) UseHostNodes(choice, out);
  if (const std::string nproc = Env("NPROC_PER_NODE");
      !nproc.empty() && choice.nproc_per_node == 0 && choice.nproc_kind.empty()) {
    out.notes.push_back(
        fmt::format("NPROC_PER_NODE={} is not used: the ranks per node come from {}; "
                    "use --nproc-per-node {} to override them",
                    nproc, out.ranks_why, nproc));
  }
}

// --nproc-per-node gpu|cpu|auto: every node's ranks counted; ssh nodes that are not this machine
// and list no gpus: (any, for cpu) asked at once.
void CountRanks(const ClusterChoice& choice, const NodeDeviceCounter& count_devices,
                ChosenCluster& out) {
  const std::string& kind = choice.nproc_kind;
  auto here = [&](const NodeSpec& node) {
    return out.spec.transport == TransportKind::kLocal ||
           (out.spec.transport == TransportKind::kSsh && IsThisMachine(node.address));
  };
  ClusterSpec to_ask = out.spec;
  to_ask.nodes.clear();
  for (const NodeSpec& node : out.spec.nodes) {
    if (!here(node) && (kind == "cpu" || node.gpus.empty())) to_ask.nodes.push_back(node);
  }
  std::map<std::string, NodeDevices> asked;
  if (!to_ask.nodes.empty() && count_devices && out.spec.transport == TransportKind::kSsh)
    asked = count_devices(to_ask);
  for (NodeSpec& node : out.spec.nodes) {
    auto it = asked.find(node.host);
    // The CUDA_VISIBLE_DEVICES the node's ranks get (MakeRankPlan: the node's env over the file's).
    const std::string* visible = nullptr;
    if (auto own = node.env.find("CUDA_VISIBLE_DEVICES"); own != node.env.end()) {
      visible = &own->second;
    } else if (auto all = out.spec.env.find("CUDA_VISIBLE_DEVICES"); all != out.spec.env.end()) {
      visible = &all->second;
    }
    node.slots =
        CountedRanks(node, here(node), kind, it == asked.end() ? nullptr : &it->second, visible);
  }
  out.ranks_why = "--nproc-per-node " + kind + (asked.empty() ? "" : ", asked on the nodes");
}

// --nproc-per-node, then -np filling the nodes in order (mpirun's and horovodrun's -np).
void ChooseRanks(const ClusterChoice& choice, const NodeDeviceCounter& count_devices,
                 ChosenCluster& out) {
  std::vector<NodeSpec>& nodes = out.spec.nodes;
  if (choice.nproc_per_node > 0) {
    for (NodeSpec& node : nodes) node.slots = choice.nproc_per_node;
    out.ranks_why = "--nproc-per-node";
  } else if (!choice.nproc_kind.empty()) {
    CountRanks(choice, count_devices, out);
  }
  if (choice.np > 0) {
    const bool only_default_node = out.source.find("(this machine)") != std::string::npos;
    if (only_default_node && choice.nproc_per_node == 0 && choice.nproc_kind.empty()) {
      nodes.front().slots = choice.np;
      out.ranks_why = "-np";
    } else {
      int total = 0;
      for (const NodeSpec& node : nodes) total += node.slots;
      if (choice.np > total) {
        throw UsageError(fmt::format(
            "-np {} asks for more ranks than the {} slot(s) of {} ({} node(s)); give more "
            "slots (HOST:SLOTS, slots=N) or a smaller -np",
            choice.np, total, out.source, nodes.size()));
      }
      int left = choice.np;
      std::vector<NodeSpec> used;
      for (NodeSpec& node : nodes) {
        if (left == 0) break;
        node.slots = std::min(node.slots, left);
        left -= node.slots;
        used.push_back(node);
      }
      nodes = used;
      out.ranks_why = fmt::format("-np {} filling {} in order", choice.np, out.ranks_why);
    }
  }
  bool uniform = true;
  for (const NodeSpec& node : nodes) uniform = uniform && node.slots == nodes.front().slots;
  std::string counts;
  for (const NodeSpec& node : nodes)
    counts += (counts.empty() ? "" : ",") + std::to_string(node.slots);
  out.ranks_why = fmt::format(
      "{} per node ({})", uniform ? std::to_string(nodes.front().slots) : counts, out.ranks_why);
}

// NAME=VALUE for every rank of `spec`: over the cluster file's env and each node's own.
void SetForEveryRank(const std::string& name, const std::string& value, ClusterSpec& spec) {
  spec.env[name] = value;
  for (NodeSpec& node : spec.nodes) node.env.erase(name);
}

// The env file first, then the file's env (MakeRankPlan adds it), then -x and horovodrun's
// options over everything.
void ChooseEnvironment(const ClusterChoice& choice, ChosenCluster& out) {
  out.env_file = ApplyEnvFile(out.spec);
  for (const std::string& item : choice.pass_env) {
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    std::string value;
    if (eq != std::string::npos) {
      value = item.substr(eq + 1);
    } else if (const char* own = std::getenv(name.c_str())) {
      value = own;
    } else {
      throw UsageError(
          fmt::format("-x {}: {} is not set in this environment; set it, or give "
                      "the value: -x {}=VALUE",
                      name, name, name));
    }
    if (name.empty()) throw UsageError("-x: expected NAME or NAME=VALUE");
    SetForEveryRank(name, value, out.spec);
  }
  std::map<std::string, std::string> horovodrun = choice.horovodrun;
  if (auto file = horovodrun.find("--config-file"); file != horovodrun.end())
    ReadHorovodrunConfig(file->second, horovodrun, out.notes);
  for (const std::string& item : HorovodrunVariables(horovodrun, out.notes)) {
    const size_t eq = item.find('=');
    SetForEveryRank(item.substr(0, eq), item.substr(eq + 1), out.spec);
  }
}

void ChooseRendezvous(const ClusterChoice& choice, ChosenCluster& out) {
  const bool local = out.spec.transport == TransportKind::kLocal;
  const bool standalone = choice.torchrun.standalone;
  const int endpoint_port =
      TorchrunRendezvousPort(choice.torchrun, choice.master_port, out.spec, out.notes);
  if (standalone) {  // torchrun's --standalone does not read them either
    std::vector<std::string> unused;
    if (!Env("MASTER_ADDR").empty()) unused.push_back("MASTER_ADDR=" + Env("MASTER_ADDR"));
    if (!Env("MASTER_PORT").empty() && choice.master_port == 0)
      unused.push_back("MASTER_PORT=" + Env("MASTER_PORT"));
    if (!unused.empty()) {
      out.notes.push_back(
          fmt::format("{}: --standalone runs on this machine with a free port "
                      "(or --master-port), as torchrun's does",
                      NotUsed(unused)));
    }
  }
  if (local && !standalone && !Env("MASTER_ADDR").empty()) out.master_addr = Env("MASTER_ADDR");
  const std::string env_port = standalone ? "" : Env("MASTER_PORT");
  if (choice.master_port > 0) {
    out.spec.rendezvous_port = choice.master_port;
    out.port_why = "--master-port";
  } else if (endpoint_port > 0) {
    out.spec.rendezvous_port = endpoint_port;
    out.port_why = "--rdzv-endpoint";
  } else if (local && !env_port.empty()) {
    char* end = nullptr;
    const long port = std::strtol(env_port.c_str(), &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) {
      throw UsageError(
          fmt::format("MASTER_PORT={}: expected a port number from 1 to 65535; fix "
                      "it, unset it, or pass --master-port PORT",
                      env_port));
    }
    out.spec.rendezvous_port = static_cast<int>(port);
    out.port_why = "MASTER_PORT in the environment";
  } else if (out.spec.rendezvous_port_given && !standalone) {
    out.port_why = "rendezvous.port in " + out.spec.source;
  } else if (local) {
    out.port_hold = std::make_shared<PortReservation>();
    out.spec.rendezvous_port = out.port_hold->port();
    out.port_why = "a free port, held until rank 0 binds it";
  } else if (choice.torchrun.backend == "c10d" && !choice.torchrun.endpoint.empty()) {
    out.spec.rendezvous_port = kTorchrunC10dPort;  // the endpoint named no port
    out.port_why = "torchrun's c10d default, as --rdzv-endpoint names no port";
  } else {
    out.spec.rendezvous_port = kDefaultRendezvousPort;
    out.port_why = "the default; --master-port or rendezvous.port to change it";
  }
}

}  // namespace

ChosenCluster ChooseCluster(const ClusterChoice& choice, const NodeDeviceCounter& count_devices) {
  ChosenCluster out;
  ChooseNodes(choice, out);
  if (choice.ssh_port > 0) {  // as a port in the cluster file: ~/.ssh/config's Port yields to it
    out.spec.ssh.port = choice.ssh_port;
    out.spec.ssh.port_given = true;
  }
  if (!choice.ssh_identity_file.empty()) out.spec.ssh.identity_file = choice.ssh_identity_file;
  if (choice.start_timeout_s > 0) {  // as the cluster file's: ~/.ssh/config's ConnectTimeout yields
    out.spec.ssh.connect_timeout_s = choice.start_timeout_s;
    out.spec.ssh.connect_timeout_given = true;
  }
  ChooseEnvironment(choice, out);  // first: the ranks' CUDA_VISIBLE_DEVICES counts their GPUs
  ChooseRanks(choice, count_devices, out);
  ApplySshConfigAddresses(out.spec);  // MASTER_ADDR: the HostName ssh reaches, not the alias
  ChooseRendezvous(choice, out);
  return out;
}

}  // namespace dtrain
