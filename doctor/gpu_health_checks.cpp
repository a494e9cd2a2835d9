// The rules about each GPU's health, from nvidia-smi: it answers at all, the node has all its
// GPUs, memory errors (ECC, remapped rows, retired pages), the driver's recovery action, MIG mode,
// persistence, the PCIe link, hardware slowdowns, a power limit or application clocks below their
// defaults, leftover processes, NVLink and the NVSwitch fabric. Thresholds and their sources are
// in dtrain-doctor(1).
#include <algorithm>
#include <functional>
#include <map>

#include <fmt/format.h>

#include "doctor/check_support.h"
#include "doctor/checks.h"

namespace dtrain {

using checks::Join;
using checks::Make;
using checks::Reached;

namespace {

// Memory a GPU holds with nothing of ours on it above which it counts as in use: an idle GPU
// shows 0 to a few MiB, a CUDA context alone about 500 MiB on an H100.
constexpr long long kBusyMib = 256;

// A power limit this far below the default is a cap someone set, not a rounding of the report.
constexpr double kPowerSlackW = 1;

// "GPU 3" or "GPUs 0, 1, 5", each with its detail in parentheses when it has one.
std::string GpuList(const std::vector<std::pair<int, std::string>>& gpus) {
  std::vector<std::string> items;
  bool details = false;
  for (const auto& [index, detail] : gpus) details = details || !detail.empty();
  for (const auto& [index, detail] : gpus) {
    items.push_back(details
                        ? fmt::format("GPU {}{}", index, detail.empty() ? "" : " (" + detail + ")")
                        : std::to_string(index));
  }
  if (details) return Join(items);
  return (gpus.size() == 1 ? "GPU " : "GPUs ") + Join(items);
}

// One per-GPU rule: what is wrong with a GPU ("" when nothing; detail text otherwise, which may be
// " " for "wrong, nothing more to say"), and how a node's finding reads.
struct GpuRule {
  const char* check;
  Severity severity;
  std::function<std::string(const GpuHealth&)> fault;
  const char* message;  // fmt: {0} node, {1} the GPU list
  const char* remedy;
};

std::vector<GpuRule> GpuRules() {
  return {
      {"gpu-ecc", Severity::kError,
       [](const GpuHealth& g) {
         const long long dram = std::max(0LL, g.dram_uncorrectable);
         const long long sram = std::max(0LL, g.sram_uncorrectable);
         if (dram + sram == 0) return std::string();
         return fmt::format("{} DRAM, {} SRAM", dram, sram);
       },
       "node {0}: uncorrectable ECC errors since the driver loaded on {1}",
       "drain the node and reset the GPU (nvidia-smi -r) or reboot, then run `dcgmi diag -r 3`; "
       "replace the GPU if they come back"},
      {"gpu-remap", Severity::kError,
       [](const GpuHealth& g) { return g.remapped_rows_pending == "Yes" ? " " : ""; },
       "node {0}: row remapping is pending on {1}: the GPU needs a reset",
       "drain the node and reset the GPU (nvidia-smi -r -i N, with nothing running on it) or "
       "reboot: the spare row replaces the failing one only then"},
      {"gpu-remap", Severity::kError,
       [](const GpuHealth& g) { return g.remapping_failure == "Yes" ? " " : ""; },
       "node {0}: row remapping failed on {1}: the GPU has no spare row left for a failing one",
       "replace the GPU (NVIDIA treats a remapping failure as grounds for a return)"},
      {"gpu-retired-pages", Severity::kError,
       [](const GpuHealth& g) { return g.retired_pages_pending == "Yes" ? " " : ""; },
       "node {0}: a page retirement is pending on {1}",
       "reset the GPU (nvidia-smi -r) or reboot so the page is retired"},
      {"gpu-ecc-mode", Severity::kWarning,
       [](const GpuHealth& g) {
         if (g.ecc_current != "Disabled") return std::string();
         return g.ecc_pending == "Enabled" ? std::string("enabled after the next reset") : " ";
       },
       "node {0}: ECC is disabled on {1}",
       "enable it (sudo nvidia-smi -e 1, then reset the GPUs or reboot): without ECC a memory "
       "error corrupts results silently"},
      {"gpu-recovery", Severity::kError,
       [](const GpuHealth& g) {
         const std::string& a = g.recovery_action;
         return a.empty() || a == "None" || a == "N/A" ? std::string() : a;
       },
       "node {0}: the driver asks for a recovery action on {1}",
       "as NVIDIA's GPU error management guide says for each: Reset: end the GPU's processes and "
       "reset it (nvidia-smi -r -i N); Reboot: reboot the node; Drain P2P: end the processes "
       "that use peer-to-peer and turn UVM persistence off, then check again; Drain and Reset: "
       "drain, then reset"},
      {"gpu-mig", Severity::kError,
       [](const GpuHealth& g) {
         if (g.mig_current != "Enabled") return std::string();
         return g.mig_pending == "Disabled" ? std::string("disabled after the next reset") : " ";
       },
       "node {0}: MIG mode is on for {1}: a process sees one MIG instance, not the whole GPU, and "
       "MIG instances have no peer-to-peer path to each other",
       "turn it off on nodes meant for training (sudo nvidia-smi -i N -mig 0, then reset the GPU "
       "with nvidia-smi -r -i N or reboot), or leave the node out"},
      {"gpu-mig", Severity::kWarning,
       [](const GpuHealth& g) {
         return g.mig_current == "Disabled" && g.mig_pending == "Enabled" ? " " : "";
       },
       "node {0}: MIG mode turns on at the next reset of {1}",
       "sudo nvidia-smi -i N -mig 0 if the node is meant for training, before the GPU is reset"},
      {"gpu-persistence", Severity::kWarning,
       [](const GpuHealth& g) { return g.persistence_mode == "Disabled" ? " " : ""; },
       "node {0}: persistence mode is off on {1}",
       "enable nvidia-persistenced (or sudo nvidia-smi -pm 1): without it the driver sets the GPUs "
       "up again for every process, which slows each job start and each nvidia-smi"},
      {"gpu-pcie", Severity::kWarning,
       [](const GpuHealth& g) {
         std::vector<std::string> why;
         if (g.pcie_width_current > 0 && g.pcie_width_current < g.pcie_width_max) {
           why.push_back(fmt::format("x{} of x{}", g.pcie_width_current, g.pcie_width_max));
         }
         // An idle GPU lowers its link generation to save power; only a busy one must be at max.
         if (!g.idle && g.pcie_gen_current > 0 && g.pcie_gen_current < g.pcie_gen_max) {
           why.push_back(
               fmt::format("gen {} of {} while busy", g.pcie_gen_current, g.pcie_gen_max));
         }
         return Join(why);
       },
       "node {0}: PCIe link below its maximum on {1}",
       "reseat the GPU (or its riser) and check the slot's settings in the BIOS: a narrow link "
       "slows every copy between host and GPU, and NCCL's traffic between nodes"},
      {"gpu-slowdown", Severity::kError,
       [](const GpuHealth& g) {
         std::vector<std::string> hard;
         for (const std::string& r : g.hw_slowdowns) {
           if (r != "HW Slowdown") hard.push_back(r);
         }
         return Join(hard);
       },
       "node {0}: the hardware is slowing down {1} to protect itself",
       "check cooling (fans, airflow, inlet temperature) and the power supplies; `nvidia-smi -q "
       "-d PERFORMANCE` shows the reasons while it lasts"},
      {"gpu-slowdown", Severity::kWarning,
       [](const GpuHealth& g) {
         const bool only_parent = g.hw_slowdowns.size() == 1 && g.hw_slowdowns[0] == "HW Slowdown";
         return only_parent ? std::string(" ") : std::string();
       },
       "node {0}: HW Slowdown is active on {1}",
       "the GPU runs at reduced clocks: check power and cooling (`nvidia-smi -q -d PERFORMANCE`)"},
      {"gpu-power", Severity::kWarning,
       [](const GpuHealth& g) {
         std::vector<std::string> why;
         if (g.power_limit_w > 0 && g.default_power_limit_w > 0 &&
             g.power_limit_w < g.default_power_limit_w - kPowerSlackW) {
           why.push_back(fmt::format("power limit {:g} W of its default {:g} W", g.power_limit_w,
                                     g.default_power_limit_w));
         }
         if (g.app_clock_mhz > 0 && g.app_clock_mhz < g.default_app_clock_mhz) {
           why.push_back(fmt::format("application clocks {} of {} MHz", g.app_clock_mhz,
                                     g.default_app_clock_mhz));
         }
         return Join(why);
       },
       "node {0}: held below its defaults: {1}",
       "under load a capped GPU runs slower than the others and a synchronous job at its pace: "
       "sudo nvidia-smi -i N -pl DEFAULT_W (and -rac for the clocks), or lift the BMC's power "
       "cap"},
      {"gpu-busy", Severity::kWarning,
       [](const GpuHealth& g) {
         std::vector<std::string> pids;
         for (const GpuProcess& p : g.processes) {
           pids.push_back(p.name.empty() ? std::to_string(p.pid)
                                         : fmt::format("{} {}", p.pid, p.name));
         }
         const bool memory = g.fb_used_mib > kBusyMib;
         if (pids.empty() && !memory) return std::string();
         std::string out = pids.empty() ? "" : "PID " + Join(pids);
         if (g.fb_used_mib > 0) {
           out += fmt::format("{}{} MiB used", out.empty() ? "" : ", ", g.fb_used_mib);
         }
         return out;
       },
       "node {0}: something already runs on {1}",
       "stop what holds the GPU (a leftover job?) before launching, or list other GPUs in the "
       "node's `gpus`; processes of other containers show as memory without a PID"},
  };
}

bool HasNvswitches(const NodeHealth& h) {
  if (h.nvswitch_devices) return true;
  return std::any_of(h.smi.gpus.begin(), h.smi.gpus.end(), [](const GpuHealth& g) {
    return !g.fabric_state.empty() && g.fabric_state != "N/A";
  });
}

}  // namespace

std::vector<Finding> CheckNvidiaSmiAnswers(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    if (n->health.smi_timeout_s <= 0) continue;
    out.push_back(Make(
        Severity::kError, "nvidia-smi", "gpus", {n->host},
        fmt::format("nvidia-smi did not answer within {:g} s on node {}: the driver may be hung",
                    n->health.smi_timeout_s, n->host),
        "look for processes stuck in the driver (`ps -eo pid,stat,cmd | grep ' D'`) and for Xid "
        "errors in dmesg; a hung driver needs a GPU reset or a reboot"));
  }
  return out;
}

std::vector<Finding> CheckGpuCount(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  std::map<size_t, int> counts;  // GPU count -> nodes with it, among nodes not listing gpus
  for (const NodeFacts* n : Reached(nodes)) {
    const size_t count = n->gpus.size();
    if (!n->gpus_from_proc && count > 0 && n->health.gpus_in_driver > static_cast<int>(count)) {
      out.push_back(
          Make(Severity::kError, "gpu-count", "gpus", {n->host},
               fmt::format("node {}: the driver holds {} GPUs, nvidia-smi answers for {}: "
                           "a GPU has fallen off the bus or failed to initialise",
                           n->host, n->health.gpus_in_driver, count),
               "reboot the node; if a GPU stays missing, reseat or replace it"));
    }
    if (count > 0 && n->listed_gpus.empty()) ++counts[count];
  }
  if (counts.size() < 2) return out;
  size_t majority = 0;
  int most = 0;
  for (const auto& [count, seen] : counts) {
    if (seen > most || (seen == most && count > majority)) majority = count, most = seen;
  }
  for (const NodeFacts* n : Reached(nodes)) {
    const size_t count = n->gpus.size();
    if (count == 0 || count >= majority || !n->listed_gpus.empty()) continue;
    out.push_back(Make(Severity::kError, "gpu-count", "gpus", {n->host},
                       fmt::format("node {} has {} GPUs, others {}", n->host, count, majority),
                       "a GPU may have fallen off the bus: check dmesg for Xid 79 and reboot; "
                       "or list the node's GPUs in its `gpus` if it really has fewer"));
  }
  return out;
}

std::vector<Finding> CheckGpuHealth(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  const std::vector<GpuRule> rules = GpuRules();
  for (const NodeFacts* n : Reached(nodes)) {
    for (const GpuRule& rule : rules) {
      std::vector<std::pair<int, std::string>> faulty;
      for (const GpuHealth& g : n->health.smi.gpus) {
        std::string fault = rule.fault(g);
        if (fault.empty()) continue;
        faulty.emplace_back(g.index, fault == " " ? "" : fault);
      }
      if (faulty.empty()) continue;
      out.push_back(Make(rule.severity, rule.check, "gpus", {n->host},
                         fmt::format(fmt::runtime(rule.message), n->host, GpuList(faulty)),
                         rule.remedy));
    }
  }
  return out;
}

std::vector<Finding> CheckNvlink(const std::vector<NodeFacts>& nodes) {
  std::vector<Finding> out;
  for (const NodeFacts* n : Reached(nodes)) {
    const NodeHealth& h = n->health;
    std::vector<std::pair<int, std::string>> down;
    for (const GpuNvlinks& links : h.nvlinks) {
      const bool connected = links.gpu >= 0 &&
                             links.gpu < static_cast<int>(h.nvlink_peers.size()) &&
                             h.nvlink_peers[links.gpu] > 0;
      if (!connected || links.inactive.empty()) continue;
      std::vector<std::string> numbers;
      for (int l : links.inactive) numbers.push_back(std::to_string(l));
      down.emplace_back(links.gpu, fmt::format("link{} {} of {}", numbers.size() == 1 ? "" : "s",
                                               Join(numbers), numbers.size() + links.active));
    }
    if (!down.empty()) {
      out.push_back(Make(Severity::kError, "nvlink", "gpus", {n->host},
                         fmt::format("node {}: NVLink links inactive on {}, which `nvidia-smi topo "
                                     "-m` shows NVLink-connected",
                                     n->host, GpuList(down)),
                         "reset the GPUs or reboot; if links stay down, have the board serviced "
                         "(`nvidia-smi nvlink -e` shows their error counters)"));
    }
    if (!HasNvswitches(h)) continue;
    const std::string& fm = h.fabric_manager;
    if (fm == "inactive" || fm == "failed" || fm == "activating" || fm == "deactivating") {
      out.push_back(Make(Severity::kError, "fabric-manager", "gpus", {n->host},
                         fmt::format("node {} has NVSwitches but Fabric Manager is {}: CUDA "
                                     "cannot start there (error 802, system not yet initialized)",
                                     n->host, fm),
                         "sudo systemctl enable --now nvidia-fabricmanager (of the same version as "
                         "the driver)"));
    }
    std::vector<std::pair<int, std::string>> unready;
    for (const GpuHealth& g : h.smi.gpus) {
      if (g.fabric_state.empty() || g.fabric_state == "N/A") continue;
      const bool ok = g.fabric_state == "Completed" &&
                      (g.fabric_status == "Success" || g.fabric_status == "N/A");
      if (!ok) {
        unready.emplace_back(g.index, fmt::format("{}, {}", g.fabric_state, g.fabric_status));
      }
    }
    if (!unready.empty()) {
      out.push_back(Make(
          Severity::kError, "fabric-manager", "gpus", {n->host},
          fmt::format("node {}: the NVLink fabric is not ready on {}", n->host, GpuList(unready)),
          "start Fabric Manager and wait until `nvidia-smi -q` shows Fabric State "
          "Completed, Status Success; its log is /var/log/fabricmanager.log"));
    }
  }
  return out;
}

}  // namespace dtrain
