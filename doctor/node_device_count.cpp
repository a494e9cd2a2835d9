#include "doctor/node_device_count.h"

#include "doctor/doctor_run.h"
#include "doctor/probe_runner.h"
#include "launcher/transport.h"

namespace dtrain {

namespace {

// Every part of the probe (templates/probe.sh DTRAIN_PROBE_SKIP) but the system facts and the
// GPU list.
constexpr const char* kCountSkips =
    "python torch horovod py_spy clip rdzv nccl_lib gpu_health kernel_log";

}  // namespace

std::map<std::string, NodeDevices> AskNodeDevices(const ClusterSpec& spec) {
  ProbeOptions options = DefaultProbeOptions(spec, kNodeDeviceCountTimeoutS);
  options.rendezvous = false;
  options.skip = kCountSkips;
  std::unique_ptr<Transport> transport = MakeTransport(spec);
  const ProbeRun run = RunProbes(spec, *transport, options);
  std::map<std::string, NodeDevices> out;
  for (const NodeFacts& node : run.nodes) {
    NodeDevices& devices = out[node.host];
    devices.gpus = static_cast<int>(node.gpus.size());
    devices.cpus = node.cpus;
    if (!node.reached) devices.error = node.error.empty() ? "the probe did not end" : node.error;
  }
  return out;
}

}  // namespace dtrain
