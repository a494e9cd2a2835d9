// Nodes from the one-off forms mpirun, horovodrun and DeepSpeed users type: `-H a:4,b:4` and a
// hostfile of `host slots=N` lines. Both build the same NodeSpecs the cluster file's `nodes` does.
#pragma once

#include <string>
#include <vector>

#include "launcher/cluster_spec.h"

namespace dtrain {

// "gpu-a:4,gpu-b:4,gpu-c" (slots default to 1). Throws UsageError naming the bad entry.
std::vector<NodeSpec> ParseHostList(const std::string& list);

// One host a line: "gpu-a slots=4" (MPI/DeepSpeed), "gpu-a:4" (Horovod) or "gpu-a"; `#` starts
// a comment. Throws UsageError("FILE:LINE: ...") on a line it cannot read, a host listed twice
// or an empty file.
std::vector<NodeSpec> ParseHostfile(const std::string& path);

}  // namespace dtrain
