// The rules about each node's own setup: its GPUs, the workdir, Python and its imports,
// dtrain-clip, its clock, its limits (/dev/shm, open files) and py-spy.
#include "doctor/checks.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "doctor/check_support.h"

namespace dtrain {

using checks::EveryNodeChecked;
using checks::JobProgram;
using checks::Join;
using checks::Make;
using checks::Reached;

namespace {

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

std::vector<Finding> CheckGpus(const ClusterSpec& spec, const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  if (!GpusExpected(spec)) return out;
  for (const NodeFacts* n : Reached(nodes)) {
    int count = static_cast<int>(n->gpus.size());
    if (count == 0 && n->health.smi_timeout_s > 0) continue;  // CheckNvidiaSmiAnswers says it
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
                       fmt::format("the workdir exists and is importable on {}",
                                   EveryNodeChecked(fine.size(), nodes.size()))));
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

namespace {

// What to do about dtrain-clip not starting, by what the probe (probe_clip) said of it.
std::string ClipRemedy(const std::string& error) {
  if (error.rfind("did not answer", 0) == 0) {
    return "see what keeps the node busy (`uptime`, `top`) and where LibTorch is read from (a "
           "slow shared file system); `dtrain-clip --version` takes well under a second on an "
           "idle node";
  }
  if (error.rfind("killed by SIGKILL", 0) == 0) {
    return "SIGKILL at its start is usually the kernel's OOM killer (`dmesg | grep -i 'killed "
           "process'`; LibTorch alone takes a few hundred MB): free memory on the node";
  }
  if (error.rfind("killed by", 0) == 0) {
    return "it crashed at its start: run `dtrain-clip --version` on the node to see it, and "
           "rebuild it there if it was built for another CPU or other libraries";
  }
  return "install what it links against (LibTorch, OpenBLAS: `ldd` on it lists what is missing) "
         "or rebuild it on the node";
}

}  // namespace

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
                 ClipRemedy(error));
           })) {
    out.push_back(std::move(f));
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

}  // namespace dtrain
