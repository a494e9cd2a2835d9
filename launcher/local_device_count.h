// torchrun's --nproc-per-node gpu|cpu|auto, for dtrain launch: how many ranks a node gets when
// they are counted instead of given. torchrun counts on the node it runs on; dtrain launches
// every node from one machine, so it counts this machine's GPUs and CPUs, takes a remote node's
// GPUs from the cluster file's `gpus:` list, and else asks the node (an ssh node, through the
// doctor's probe: NodeDeviceCounter).
#pragma once

#include <functional>
#include <map>
#include <string>

#include "launcher/cluster_spec.h"

namespace dtrain {

// A node's GPUs (what nvidia-smi lists there) and CPUs, as the node itself said.
struct NodeDevices {
  int gpus = 0;
  int cpus = 0;
  std::string error;  // why the node could not be asked; "" when it answered
};

// Asks every node of `nodes` at once: host -> what it said. The launch gets the doctor's probe
// (doctor/node_device_count.h); none: remote nodes are not asked.
using NodeDeviceCounter = std::function<std::map<std::string, NodeDevices>(const ClusterSpec&)>;

// The GPUs ranks here would see: the entries of CUDA_VISIBLE_DEVICES when it is set, else the
// GPUs `nvidia-smi -L` lists (0 when there is none, or no nvidia-smi, or it does not answer
// within 10 s).
int LocalGpuCount();

// The GPUs CUDA shows a process whose CUDA_VISIBLE_DEVICES is `devices`, on a node with `present`
// GPUs (-1: not known): its entries up to the first that is empty, negative or, where `present`
// is known, an index past the node's GPUs (CUDA stops there).
int VisibleGpuCount(const std::string& devices, int present);

// The CPUs this process may run on (its affinity mask).
int LocalCpuCount();

// The ranks `node` gets for --nproc-per-node `kind` (gpu, cpu or auto, torchrun's meanings:
// auto is gpu where there are GPUs, else cpu). `here`: the node is this machine. A node that
// lists `gpus:` has that many GPUs; this machine's are counted here; another node's come from
// `asked` (what the node said), else they are not known. `visible`: the CUDA_VISIBLE_DEVICES the
// cluster file (or -x) gives the node's ranks, which they count as torch.cuda.device_count()
// would. Throws UsageError naming the node and what to write instead when they cannot be counted.
int CountedRanks(const NodeSpec& node, bool here, const std::string& kind,
                 const NodeDevices* asked = nullptr, const std::string* visible = nullptr);

}  // namespace dtrain
