// The command every rank of an attempt runs: the job's command, under torchrun's worker
// watchdog when the job asked for it (file_timer.h), and bound to the CPUs near its GPU with
// --numa-binding (numa_binding.h). The same words for every rank, as one Slurm step needs.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

std::vector<std::string> RankCommand(const std::vector<std::string>& command,
                                     const ClusterSpec& spec, const std::string& numa_binding);

}  // namespace dtrain
