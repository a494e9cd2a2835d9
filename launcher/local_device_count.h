// torchrun's --nproc-per-node gpu|cpu|auto, for dtrain launch: how many ranks a node gets when
// they are counted instead of given. torchrun counts on the node it runs on; dtrain launches
// every node from one machine, so it counts this machine's GPUs and CPUs, and takes a remote
// node's GPUs from the cluster file's `gpus:` list.
#pragma once

#include <string>

#include "launcher/cluster_spec.h"

namespace dtrain {

// The GPUs ranks here would see: the entries of CUDA_VISIBLE_DEVICES when it is set, else the
// GPUs `nvidia-smi -L` lists (0 when there is none, or no nvidia-smi, or it does not answer
// within 10 s).
int LocalGpuCount();

// The CPUs this process may run on (its affinity mask).
int LocalCpuCount();

// The ranks `node` gets for --nproc-per-node `kind` (gpu, cpu or auto, torchrun's meanings:
// auto is gpu where there are GPUs, else cpu). `here`: the node is this machine. A node that
// lists `gpus:` has that many GPUs; otherwise only this machine's are counted. Throws
// UsageError naming the node and what to write instead when they cannot be counted.
int CountedRanks(const NodeSpec& node, bool here, const std::string& kind);

}  // namespace dtrain
