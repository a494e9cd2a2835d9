#include "launcher/local_device_count.h"

#include <sched.h>

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/short_command.h"

namespace dtrain {

int VisibleGpuCount(const std::string& devices, int present) {
  int count = 0;
  std::stringstream list(devices);
  for (std::string item; std::getline(list, item, ',');) {
    if (item.empty() || item[0] == '-') break;  // CUDA stops at the first invalid entry
    if (present >= 0 && item.find_first_not_of("0123456789") == std::string::npos &&
        (item.size() > 4 || std::stoi(item) >= present)) {
      break;
    }
    ++count;
  }
  return count;
}

int LocalGpuCount() {
  if (const char* devices = std::getenv("CUDA_VISIBLE_DEVICES"))
    return VisibleGpuCount(devices, -1);
  const ShortCommandResult listed = RunShortCommand({"nvidia-smi", "-L"}, "", 10000);
  std::stringstream lines(listed.status >= 0 ? listed.out : "");  // none if it did not answer
  int count = 0;
  for (std::string line; std::getline(lines, line);) count += line.rfind("GPU ", 0) == 0 ? 1 : 0;
  return count;
}

int LocalCpuCount() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

int CountedRanks(const NodeSpec& node, bool here, const std::string& kind, const NodeDevices* asked,
                 const std::string* visible) {
  if (kind != "gpu" && kind != "cpu" && kind != "auto") {
    throw UsageError("--nproc-per-node " + kind + ": expected a number, gpu, cpu or auto");
  }
  if (kind != "cpu" && !node.gpus.empty()) return static_cast<int>(node.gpus.size());
  const char* what = kind == "cpu" ? "CPUs" : "GPUs";
  if (!here && asked && !asked->error.empty()) {
    throw UsageError(fmt::format(
        "--nproc-per-node {}: node {} could not be asked for its {}: {}; list its GPUs in the "
        "cluster file (gpus: [0, 1, 2, 3]) or give the number of ranks (--nproc-per-node 4)",
        kind, node.host, what, asked->error));
  }
  if (!here && !asked) {
    throw UsageError(fmt::format(
        "--nproc-per-node {}: node {} is not this machine and its {} are not known here; list "
        "its GPUs in the cluster file (gpus: [0, 1, 2, 3]) or give the number of ranks "
        "(--nproc-per-node 4)",
        kind, node.host, what));
  }
  if (kind != "cpu") {
    // The ranks' own CUDA_VISIBLE_DEVICES, where the cluster file gives one, without asking
    // nvidia-smi here for a count it would replace.
    const int gpus = visible ? VisibleGpuCount(*visible, here ? -1 : asked->gpus)
                     : here  ? LocalGpuCount()
                             : asked->gpus;
    if (gpus > 0) return gpus;
    if (kind == "gpu") {
      const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
      throw UsageError(fmt::format(
          "--nproc-per-node gpu: no GPU on {} ({}); give the number of ranks, or cpu or auto",
          here ? "this machine" : "node " + node.host,
          visible ? fmt::format("the CUDA_VISIBLE_DEVICES='{}' its ranks get names none of its {}",
                                *visible,
                                here ? std::string("GPUs") : fmt::format("{} GPU(s)", asked->gpus))
          : !here ? std::string("nvidia-smi lists none there")
          : devices ? fmt::format("CUDA_VISIBLE_DEVICES='{}' names none", devices)
                    : std::string("nvidia-smi -L lists none")));
    }
  }
  return std::min(here ? LocalCpuCount() : std::max(asked->cpus, 1), 4096);
}

}  // namespace dtrain
