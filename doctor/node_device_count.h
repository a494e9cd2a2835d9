// `dtrain launch --nproc-per-node gpu|cpu|auto` on ssh nodes: each node's GPUs and CPUs, asked
// on the node with the doctor's probe (its GPU list and CPU count only), all nodes at once.
#pragma once

#include <map>
#include <string>

#include "launcher/cluster_spec.h"
#include "launcher/local_device_count.h"

namespace dtrain {

// The probe's limit: nvidia-smi's own (DTRAIN_PROBE_SMI_TIMEOUT, default 10 s) and room.
constexpr double kNodeDeviceCountTimeoutS = 20;

// host -> the GPUs nvidia-smi lists there (else the driver's /proc list) and the CPUs there; a
// node that could not be probed has `error` set. Throws dtrain::Error only when the transport
// cannot be built.
std::map<std::string, NodeDevices> AskNodeDevices(const ClusterSpec& spec);

}  // namespace dtrain
