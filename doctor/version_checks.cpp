// The rules about versions: the same on every node (the SharedFact table), as the cluster file's
// `expect` pins them, and fitting each other on one node (torch's NCCL and the library found,
// the driver and CUDA).
#include "doctor/checks.h"

#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "doctor/check_support.h"

namespace dtrain {

using checks::AllOrSomeOf;
using checks::EveryNodeChecked;
using checks::Join;
using checks::Make;
using checks::Reached;

namespace {

std::string Shown(const Version& v) {
  return v.known() ? v.text : "none";
}

// Where an agreeing fact holds: every node of the cluster, or only those that answered (and have
// the package the fact is about).
std::string OnAll(size_t compared, size_t total) {
  if (compared >= total && total == 1) return "on the only node";
  return fmt::format("on {} nodes", AllOrSomeOf(compared, total));
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

std::optional<Version> PinOf(const NodeFacts& f, const std::string& key) {
  if (key == "cuda") return f.cuda;
  if (key == "nccl") return f.Nccl();
  if (key == "python") return f.python_version;
  if (key == "torch") return f.torch;
  if (key == "horovod") return f.horovod;
  if (key == "driver") return f.driver;
  return std::nullopt;
}

}  // namespace

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
                         fmt::format("{} matches the pin {} on {}", key, wanted_text,
                                     EveryNodeChecked(Reached(nodes).size(), nodes.size()))));
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

}  // namespace dtrain
