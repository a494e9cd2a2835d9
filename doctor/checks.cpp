// The rules behind `dtrain doctor`, one function each; CheckCluster runs them in report order.
#include "doctor/checks.h"

#include "launcher/ssh/ssh_session.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

namespace dtrain {
namespace {

std::string Join(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

std::vector<const NodeFacts*> Reached(const std::vector<NodeFacts>& nodes) {
  std::vector<const NodeFacts*> out;
  for (const auto& n : nodes) {
    if (n.reached) out.push_back(&n);
  }
  return out;
}

Finding Make(Severity severity, std::string check, std::string fact, std::vector<std::string> nodes,
             std::string message, std::string remedy = "") {
  return Finding{severity,         std::move(check),   std::move(fact),
                 std::move(nodes), std::move(message), std::move(remedy)};
}

std::string Shown(const Version& v) {
  return v.known() ? v.text : "none";
}

// Where an agreeing fact holds: every node of the cluster, or only those that answered (and have
// the package the fact is about).
std::string OnAll(size_t compared, size_t total) {
  if (compared < total) return fmt::format("on {} of {} nodes", compared, total);
  return total == 1 ? "on the only node" : fmt::format("on all {} nodes", total);
}

// One fact that must agree across nodes: how to group it and how to show it.
struct SharedFact {
  const char* check;  // also the report column unless `column` names another
  const char* label;  // "NCCL"
  Severity severity;
  std::function<std::string(const NodeFacts&)> key;    // what must agree ("" = not found)
  std::function<std::string(const NodeFacts&)> shown;  // what the report prints
  const char* remedy;
  const char* column = nullptr;
  // Compared only among the nodes where it holds (a build detail of a package they all have).
  std::function<bool(const NodeFacts&)> applies = nullptr;
};

std::vector<SharedFact> SharedFacts() {
  auto mm = [](const Version& v) { return v.known() ? v.MajorMinor() : ""; };
  return {
      {"driver", "driver branch", Severity::kWarning,
       [](const NodeFacts& f) { return f.driver.known() ? std::to_string(f.driver.Major()) : ""; },
       [](const NodeFacts& f) { return Shown(f.driver); },
       "install the same driver branch on every node"},
      {"cuda", "CUDA", Severity::kError, [mm](const NodeFacts& f) { return mm(f.cuda); },
       [](const NodeFacts& f) { return Shown(f.cuda); },
       "install the same CUDA toolkit, or point CUDA_HOME and PATH at it in the cluster file's "
       "env"},
      {"nccl", "NCCL", Severity::kError, [mm](const NodeFacts& f) { return mm(f.Nccl()); },
       [](const NodeFacts& f) { return Shown(f.Nccl()); },
       "install the same NCCL, or set LD_LIBRARY_PATH in the cluster file's env"},
      {"python", "Python", Severity::kError,
       [mm](const NodeFacts& f) { return mm(f.python_version); },
       [](const NodeFacts& f) { return Shown(f.python_version); },
       "use the same Python everywhere: set `python:` in the cluster file to one interpreter"},
      {"torch", "torch", Severity::kError, [mm](const NodeFacts& f) { return mm(f.torch); },
       [](const NodeFacts& f) { return Shown(f.torch); },
       "install the same torch in the environment `python:` points to on every node"},
      {"horovod", "Horovod", Severity::kError, [mm](const NodeFacts& f) { return mm(f.horovod); },
       [](const NodeFacts& f) { return Shown(f.horovod); },
       "install the same Horovod (built with the same frameworks) on every node"},
      {"clip", "dtrain-clip", Severity::kWarning, [mm](const NodeFacts& f) { return mm(f.clip); },
       [](const NodeFacts& f) { return Shown(f.clip); },
       "install the same dtrain-clip release on every node"},
      // torch brings its own CUDA runtime and NCCL: one build everywhere, as for the system's.
      {"torch-cuda", "torch's CUDA", Severity::kWarning,
       [mm](const NodeFacts& f) { return mm(f.torch_cuda); },
       [](const NodeFacts& f) { return Shown(f.torch_cuda); },
       "install the same torch build (the same +cuXY wheel) on every node", "torch",
       [](const NodeFacts& f) { return f.torch.known(); }},
      {"torch-nccl-build", "torch's NCCL", Severity::kError,
       [mm](const NodeFacts& f) { return mm(f.torch_nccl); },
       [](const NodeFacts& f) { return Shown(f.torch_nccl); },
       "install the same torch build on every node (its bundled NCCL must match across nodes)",
       "nccl", [](const NodeFacts& f) { return f.torch.known(); }},
      {"horovod-build", "Horovod's frameworks/controllers/tensor operations", Severity::kError,
       [](const NodeFacts& f) { return HorovodBuild(f); },
       [](const NodeFacts& f) { return HorovodBuild(f); },
       "build Horovod the same way on every node (HOROVOD_WITH_PYTORCH=1, HOROVOD_WITH_GLOO=1, "
       "HOROVOD_GPU_OPERATIONS=NCCL)",
       "horovod", [](const NodeFacts& f) { return f.horovod.known(); }},
  };
}

Finding CompareAcross(const SharedFact& fact, const std::vector<const NodeFacts*>& nodes,
                      size_t cluster_size) {
  // Groups in first-seen order; the largest group is the majority (ties: the first node's).
  std::vector<std::string> order;
  std::map<std::string, std::vector<const NodeFacts*>> groups;
  for (const NodeFacts* n : nodes) {
    std::string key = fact.key(*n);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(n);
  }
  std::string majority = order.front();
  for (const auto& key : order) {
    if (groups[key].size() > groups[majority].size()) majority = key;
  }
  const std::string majority_shown = fact.shown(*groups[majority].front());
  const char* column = fact.column ? fact.column : fact.check;
  if (order.size() == 1) {
    return Make(
        Severity::kOk, fact.check, column, {},
        fmt::format("{} {} {}", fact.label, majority_shown, OnAll(nodes.size(), cluster_size)));
  }
  std::vector<std::string> odd, described;
  std::string odd_shown;
  for (const NodeFacts* n : nodes) {
    if (fact.key(*n) == majority) continue;
    odd.push_back(n->host);
    odd_shown = fact.shown(*n);
    described.push_back(fmt::format("{} ({})", n->host, odd_shown));
  }
  std::string message =
      odd.size() == 1
          ? fmt::format("node {} has {} {}, others {}", odd[0], fact.label, odd_shown,
                        majority_shown)
          : fmt::format("nodes {} differ in {} from the other {} nodes' {}", Join(described),
                        fact.label, groups[majority].size(), majority_shown);
  return Make(fact.severity, fact.check, column, odd, message, fact.remedy);
}

std::string ReachRemedy(ReachFailure failure, const NodeFacts& n, int ssh_port) {
  switch (failure) {
    case ReachFailure::kAuth:
      return "install your public key on the node (ssh-copy-id) or set ssh.identity_file / "
             "ssh.user";
    case ReachFailure::kHostKey:
      return fmt::format(
          "check the host key and add it to known_hosts ({}), or use "
          "ssh.host_key_policy: accept-new for new hosts",
          KeyscanCommand(n.address, ssh_port));
    case ReachFailure::kTimeout:
      return "check that the node is up and the address is right; raise ssh.connect_timeout or "
             "--timeout if it is just slow";
    case ReachFailure::kRefused:
      return "start sshd on the node, or set ssh.port to the port it listens on";
    case ReachFailure::kUnresolved:
      return "fix the node's address in the cluster file (or its DNS / /etc/hosts entry)";
    case ReachFailure::kNetwork:
      return fmt::format(
          "{}:{} cannot be reached from this machine: check it with `nc -vz {} {}` and the route "
          "with `ip route get {}` (a firewall, a VPN that is down, a wrong address:); then "
          "`ssh -p {} {} true`",
          n.address, ssh_port, n.address, ssh_port, n.address, ssh_port, n.address);
    case ReachFailure::kNone:
    case ReachFailure::kOther:
      break;
  }
  return fmt::format(
      "check the connection to {}:{} by hand: `nc -vz {} {}`, then `ssh -p {} {} true` shows the "
      "error as OpenSSH reports it",
      n.address, ssh_port, n.address, ssh_port, ssh_port, n.address);
}

std::optional<Version> PinOf(const NodeFacts& f, const std::string& key) {
  if (key == "cuda") return f.cuda;
  if (key == "nccl") return f.Nccl();
  if (key == "python") return f.python_version;
  if (key == "torch") return f.torch;
  if (key == "horovod") return f.horovod;
  if (key == "driver") return f.driver;
  return std::nullopt;
}

std::string JobProgram(const ClusterSpec& spec) {
  if (spec.job.command.empty()) return "dtrain-clip";
  const std::string& argv0 = spec.job.command[0];
  size_t slash = argv0.rfind('/');
  return argv0.substr(slash == std::string::npos ? 0 : slash + 1);
}

bool UsesClip(const ClusterSpec& spec) {
  return JobProgram(spec) == "dtrain-clip";
}

// One finding per distinct error text, naming every node that printed it.
std::vector<Finding> GroupedErrors(
    const std::vector<const NodeFacts*>& nodes,
    const std::function<std::string(const NodeFacts&)>& error,
    const std::function<Finding(std::vector<std::string> hosts, const std::string& error)>& make) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> hosts;
  for (const NodeFacts* n : nodes) {
    const std::string text = error(*n);
    if (text.empty()) continue;
    if (!hosts.count(text)) order.push_back(text);
    hosts[text].push_back(n->host);
  }
  std::vector<Finding> out;
  for (const auto& text : order) out.push_back(make(hosts[text], text));
  return out;
}

std::string NodesWord(const std::vector<std::string>& hosts) {
  return fmt::format("{} {}", hosts.size() == 1 ? "node" : "nodes", Join(hosts));
}

}  // namespace

const char* SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kOk:
      return "ok";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "error";
}

Severity WorstSeverity(const std::vector<Finding>& findings) {
  Severity worst = Severity::kOk;
  for (const auto& f : findings) worst = std::max(worst, f.severity);
  return worst;
}

bool JobUsesPython(const ClusterSpec& spec) {
  if (!spec.python.empty()) return true;
  const std::string program = JobProgram(spec);
  if (program.rfind("python", 0) == 0) return true;
  for (const char* launcher : {"torchrun", "horovodrun", "accelerate", "deepspeed"}) {
    if (program == launcher) return true;
  }
  return false;
}

bool GpusExpected(const ClusterSpec& spec) {
  if (spec.expect.count("cuda") || spec.expect.count("driver")) return true;
  return std::any_of(spec.nodes.begin(), spec.nodes.end(),
                     [](const NodeSpec& n) { return !n.gpus.empty(); });
}

std::vector<Finding> CheckReach(const std::vector<NodeFacts>& nodes, int ssh_port) {
  std::vector<Finding> out;
  for (const auto& n : nodes) {
    if (n.reached) continue;
    std::string reason = n.failure == ReachFailure::kOther || n.failure == ReachFailure::kNone
                             ? ""
                             : std::string(ReachFailureName(n.failure)) + ": ";
    // The transport's errors name the node themselves; once is enough.
    const std::string prefix = fmt::format("node {} ({}): ", n.host, n.address);
    const std::string error =
        n.error.rfind(prefix, 0) == 0 ? n.error.substr(prefix.size()) : n.error;
    out.push_back(Make(
        Severity::kError, "reach", "reach", {n.host},
        fmt::format("node {} ({}) could not be probed: {}{}", n.host, n.address, reason, error),
        ReachRemedy(n.failure, n, ssh_port)));
  }
  if (out.empty()) {
    out.push_back(Make(
        Severity::kOk, "reach", "reach", {},
        fmt::format("{} reached without a prompt",
                    nodes.size() == 1 ? "the node" : fmt::format("all {} nodes", nodes.size()))));
  }
  return out;
}

std::vector<Finding> CheckConsistency(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  auto reached = Reached(nodes);
  if (reached.empty()) return out;
  for (const auto& fact : SharedFacts()) {
    std::vector<const NodeFacts*> compared;
    for (const NodeFacts* n : reached) {
      if (!fact.applies || fact.applies(*n)) compared.push_back(n);
    }
    bool any = std::any_of(compared.begin(), compared.end(),
                           [&](const NodeFacts* n) { return !fact.key(*n).empty(); });
    if (any) out.push_back(CompareAcross(fact, compared, nodes.size()));
  }
  return out;
}

std::vector<Finding> CheckTorchNccl(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    if (!n->torch_nccl.known() || !n->nccl_library.known()) continue;
    if (n->torch_nccl.MajorMinor() == n->nccl_library.MajorMinor()) continue;
    out.push_back(
        Make(Severity::kWarning, "torch-nccl", "nccl", {n->host},
             fmt::format("node {}: torch was built with NCCL {}, the library found is {} ({})",
                         n->host, n->torch_nccl.text, n->nccl_library.text, n->nccl_library_path),
             "make LD_LIBRARY_PATH in the cluster file's env point at an NCCL matching torch's, or "
             "use torch's bundled NCCL"));
  }
  return out;
}

std::vector<Finding> CheckPins(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const auto& [key, wanted_text] : spec.expect) {
    auto wanted = Version::Parse(wanted_text);
    if (!wanted) {
      out.push_back(Make(Severity::kError, "expect", "", {},
                         fmt::format("expect.{}: '{}' is not a version number", key, wanted_text),
                         fmt::format("write expect.{} as digits and dots, e.g. \"12.4\"", key)));
      continue;
    }
    std::vector<std::string> bad, described;
    for (const NodeFacts* n : Reached(nodes)) {
      auto actual = PinOf(*n, key);
      if (actual && MatchesPin(*actual, *wanted)) continue;
      bad.push_back(n->host);
      described.push_back(fmt::format("{} has {}", n->host, actual ? Shown(*actual) : "none"));
    }
    if (bad.empty()) {
      out.push_back(Make(Severity::kOk, "expect", key, {},
                         fmt::format("{} matches the pin {} on every node", key, wanted_text)));
    } else {
      out.push_back(Make(
          Severity::kError, "expect", key, bad,
          fmt::format("expect.{} is {}: {}", key, wanted_text, Join(described)),
          fmt::format("install {} {} on these nodes, or change expect.{}", key, wanted_text, key)));
    }
  }
  return out;
}

std::vector<Finding> CheckDriverForCuda(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    if (!n->driver.known()) continue;
    for (const auto& [what, cuda] : {std::pair<const char*, const Version*>{"CUDA", &n->cuda},
                                     {"torch's CUDA", &n->torch_cuda}}) {
      if (!cuda->known()) continue;
      auto minimum = MinimumDriverForCuda(cuda->Major());
      if (!minimum || CompareVersions(n->driver, *minimum) >= 0) continue;
      out.push_back(Make(Severity::kError, "driver-cuda", "driver", {n->host},
                         fmt::format("node {}: driver {} is too old for {} {} (needs >= {})",
                                     n->host, n->driver.text, what, cuda->text, minimum->text),
                         fmt::format("upgrade the NVIDIA driver to {} or newer, or use a CUDA {} "
                                     "build that this driver supports",
                                     minimum->text, what)));
    }
  }
  return out;
}

std::vector<Finding> CheckGpus(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  if (!GpusExpected(spec)) return out;
  for (const NodeFacts* n : Reached(nodes)) {
    int count = static_cast<int>(n->gpus.size());
    if (count == 0) {
      std::string why = n->nvidia_smi_error.empty() ? "" : ": " + n->nvidia_smi_error;
      out.push_back(Make(Severity::kError, "gpus", "gpus", {n->host},
                         fmt::format("node {}: no NVIDIA GPU found{}", n->host, why),
                         "install the NVIDIA driver (nvidia-smi must work), or remove `gpus` and "
                         "the cuda/driver pins for a CPU run"));
      continue;
    }
    if (n->gpus_from_proc && !n->nvidia_smi_error.empty()) {
      out.push_back(Make(Severity::kError, "gpus", "gpus", {n->host},
                         fmt::format("node {}: the driver lists {} GPUs but nvidia-smi fails: {}",
                                     n->host, count, n->nvidia_smi_error),
                         "after a driver upgrade, reboot (or reload the nvidia modules) so the "
                         "library and the kernel module match; else reinstall the driver"));
    }
    if (count < n->slots) {
      out.push_back(Make(Severity::kError, "gpus", "gpus", {n->host},
                         fmt::format("node {} has {} GPUs for {} slots", n->host, count, n->slots),
                         fmt::format("set slots: {} for this node, or run on a node with more "
                                     "GPUs",
                                     count)));
    }
    for (int id : n->listed_gpus) {
      if (id < count) continue;
      out.push_back(
          Make(Severity::kError, "gpus", "gpus", {n->host},
               fmt::format("node {} lists GPU {}, but has GPUs 0..{}", n->host, id, count - 1),
               "list only GPUs the node has in its `gpus`"));
    }
  }
  return out;
}

std::vector<Finding> CheckWorkdir(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  std::vector<std::string> fine;
  for (const NodeFacts* n : Reached(nodes)) {
    if (!n->workdir_exists) {
      out.push_back(Make(Severity::kError, "workdir", "pythonpath", {n->host},
                         fmt::format("node {}: workdir {} does not exist", n->host, n->workdir),
                         "create it or sync the project there (shared filesystem, rsync), or fix "
                         "`workdir:`"));
    } else if (n->pythonpath_workdir == "no") {
      out.push_back(Make(Severity::kError, "pythonpath", "pythonpath", {n->host},
                         fmt::format("node {}: with PYTHONPATH as the launcher sets it, {} is "
                                     "not on Python's sys.path",
                                     n->host, n->workdir),
                         "check that the node's shell startup files do not overwrite PYTHONPATH"));
    } else {
      fine.push_back(n->host);
    }
  }
  if (out.empty() && !fine.empty()) {
    out.push_back(Make(Severity::kOk, "workdir", "pythonpath", {},
                       "the workdir exists and is importable on every node"));
  }
  return out;
}

std::vector<Finding> CheckPythonErrors(const ClusterSpec& spec,
                                       const std::vector<NodeFacts>& nodes) {
  const Severity severity = JobUsesPython(spec) ? Severity::kError : Severity::kWarning;
  const auto reached = Reached(nodes);
  std::vector<Finding> out;
  auto add = [&out](std::vector<Finding> more) {
    for (auto& f : more) out.push_back(std::move(f));
  };
  add(GroupedErrors(
      reached, [](const NodeFacts& n) { return n.python_error; },
      [&](std::vector<std::string> hosts, const std::string& error) {
        return Make(severity, "interpreter", "python", hosts,
                    fmt::format("{}: {}", NodesWord(hosts), error),
                    "install Python there, or set `python:` in the cluster file to the "
                    "interpreter's full path");
      }));
  add(GroupedErrors(
      reached, [](const NodeFacts& n) { return n.torch_error; },
      [&](std::vector<std::string> hosts, const std::string& error) {
        return Make(severity, "import", "torch", hosts,
                    fmt::format("`import torch` fails on {}: {}", NodesWord(hosts), error),
                    "repair torch in the environment `python:` points to (run `python -c "
                    "'import torch'` on the node to see the whole error)");
      }));
  add(GroupedErrors(
      reached, [](const NodeFacts& n) { return n.horovod_error; },
      [&](std::vector<std::string> hosts, const std::string& error) {
        return Make(severity, "import", "horovod", hosts,
                    fmt::format("`import horovod` fails on {}: {}", NodesWord(hosts), error),
                    "reinstall Horovod against the torch installed there (pip install "
                    "--no-cache-dir horovod, with HOROVOD_WITH_PYTORCH=1)");
      }));
  return out;
}

std::vector<Finding> CheckClip(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  const bool used = UsesClip(spec);
  std::vector<std::string> missing;
  for (const NodeFacts* n : Reached(nodes)) {
    if (n->clip_path.empty()) missing.push_back(n->host);
  }
  if (used && !missing.empty()) {
    out.push_back(
        Make(Severity::kError, "clip", "clip", missing,
             fmt::format("the job runs dtrain-clip, which is not installed on {}", Join(missing)),
             "install dtrain-clip on these nodes (next to dtrain or on PATH)"));
  }
  for (auto& f : GroupedErrors(
           Reached(nodes), [](const NodeFacts&n) { return n.clip_error; },
           [used](std::vector<std::string> hosts, const std::string&error) {
             return Make(
                 used ? Severity::kError : Severity::kWarning, "clip", "clip", hosts,
                 fmt::format("dtrain-clip does not start on {}: {}", NodesWord(hosts), error),
                 "install what it links against (LibTorch, OpenBLAS: `ldd` on it lists "
                 "what is missing) or rebuild it on the node");
           })) {
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Finding> CheckRendezvous(const ProbeRun& run) {
  std::vector<Finding> out;
  if (run.nodes.empty() || !run.nodes[0].reached) return out;
  const std::string target = fmt::format("{}:{}", run.master_addr, run.master_port);
  const std::string& first = run.nodes[0].host;
  if (!run.listener.started) {
    bool busy = run.listener.error.find("in use") != std::string::npos;
    out.push_back(Make(busy ? Severity::kError : Severity::kWarning, "rendezvous", "rdzv", {first},
                       fmt::format("rendezvous not tested: could not listen on {} on {}: {}",
                                   run.master_port, first, run.listener.error),
                       busy ? "stop what holds the port (a previous job?) or choose another "
                              "rendezvous.port"
                            : "make Python available on the first node (`python:`) to test it"));
    return out;
  }
  for (const NodeFacts* n : Reached(run.nodes)) {
    if (n->rendezvous == "ok") continue;
    bool untested = n->rendezvous == "untested" || n->rendezvous.empty();
    std::string detail = n->rendezvous_detail.empty() ? "" : " (" + n->rendezvous_detail + ")";
    out.push_back(Make(
        untested ? Severity::kWarning : Severity::kError, "rendezvous", "rdzv", {n->host},
        untested ? fmt::format("node {}: rendezvous not tested{}", n->host, detail)
                 : fmt::format("node {} cannot connect to MASTER_ADDR:MASTER_PORT {}: {}{}",
                               n->host, target, n->rendezvous, detail),
        untested ? "install bash and coreutils' timeout, or Python, on the node"
                 : fmt::format("allow TCP port {} from {} to {} (firewall, security group) and "
                               "check it from {}: `nc -vz {} {}`, `ip route get {}`; or choose "
                               "another rendezvous.port",
                               run.master_port, n->host, first, n->host, run.master_addr,
                               run.master_port, run.master_addr)));
  }
  if (out.empty()) {
    out.push_back(Make(Severity::kOk, "rendezvous", "rdzv", {},
                       fmt::format("every node connects to {}", target)));
  }
  return out;
}

std::vector<Finding> CheckClockSkew(const std::vector<NodeFacts>& nodes) {
  std::vector<const NodeFacts*> timed;
  for (const NodeFacts* n : Reached(nodes)) {
    if (n->clock_known) timed.push_back(n);
  }
  if (timed.size() < 2) return {};
  std::vector<double> offsets;
  for (const NodeFacts* n : timed) offsets.push_back(n->clock_offset_s);
  std::sort(offsets.begin(), offsets.end());
  double median = offsets[offsets.size() / 2];
  double spread = offsets.back() - offsets.front();
  if (spread < 1.0) {
    return {Make(Severity::kOk, "clock", "clock", {},
                 fmt::format("clocks agree within {:.0f} ms", spread * 1000))};
  }
  std::vector<std::string> off;
  for (const NodeFacts* n : timed) {
    if (std::fabs(n->clock_offset_s - median) >= 0.5) {
      off.push_back(fmt::format("{} ({:+.1f} s)", n->host, n->clock_offset_s - median));
    }
  }
  std::vector<std::string> hosts;
  for (const NodeFacts* n : timed) {
    if (std::fabs(n->clock_offset_s - median) >= 0.5) hosts.push_back(n->host);
  }
  return {Make(Severity::kWarning, "clock", "clock", hosts,
               fmt::format("clocks differ by {:.1f} s: {}", spread, Join(off)),
               "enable time synchronisation (chrony or systemd-timesyncd) on these nodes")};
}

std::vector<Finding> CheckLimits(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    if (n->shm_kib > 0 && n->shm_kib < 512 * 1024) {
      out.push_back(
          Make(Severity::kWarning, "shm", "shm", {n->host},
               fmt::format("node {}: /dev/shm is only {} MiB", n->host, n->shm_kib / 1024),
               "NCCL and data-loader workers need shared memory: enlarge /dev/shm "
               "(docker --shm-size=8g)"));
    }
    if (n->nofile >= 0 && n->nofile < 1024) {
      out.push_back(Make(Severity::kWarning, "nofile", "", {n->host},
                         fmt::format("node {}: ulimit -n is {}", n->host, n->nofile),
                         "raise the open-file limit (limits.conf nofile, or LimitNOFILE)"));
    }
  }
  return out;
}

// A Python job's stall report shows each rank's Python stack only where py-spy is.
std::vector<Finding> CheckPySpy(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes) {
  if (!JobUsesPython(spec)) return {};
  std::vector<std::string> without;
  for (const NodeFacts* n : Reached(nodes)) {
    if (n->py_spy_probed && n->py_spy.empty()) without.push_back(n->host);
  }
  if (without.empty()) return {};
  return {Make(Severity::kWarning, "py-spy", "", without,
               fmt::format("py-spy is not on {}: a stall report shows the kernel's view of "
                           "their ranks (state, wchan), not their Python stacks",
                           NodesWord(without)),
               "pip install py-spy (into the job's Python environment, or ~/.local)")};
}

std::vector<Finding> CheckCluster(const ClusterSpec& spec, const ProbeRun& run) {
  std::vector<Finding> all;
  auto add = [&all](std::vector<Finding> more) {
    for (auto& f : more) all.push_back(std::move(f));
  };
  add(CheckReach(run.nodes, spec.ssh.port));
  add(CheckConsistency(run.nodes));
  add(CheckTorchNccl(run.nodes));
  add(CheckPins(spec, run.nodes));
  add(CheckDriverForCuda(run.nodes));
  add(CheckGpus(spec, run.nodes));
  add(CheckWorkdir(run.nodes));
  add(CheckPythonErrors(spec, run.nodes));
  add(CheckClip(spec, run.nodes));
  add(CheckRendezvous(run));
  add(CheckClockSkew(run.nodes));
  add(CheckLimits(run.nodes));
  add(CheckPySpy(spec, run.nodes));
  return all;
}

}  // namespace dtrain
