// RunDoctor: cluster spec -> transport -> probes -> checks.
#include "doctor/doctor_run.h"

#include <unistd.h>

#include <climits>
#include <random>

#include "doctor/doctor_job.h"
#include "launcher/env_file.h"
#include "launcher/rank_log.h"
#include "launcher/slurm/slurm_allocation.h"
#include "launcher/transport.h"

namespace dtrain {
namespace {

std::string CurrentDirectory() {
  char buf[PATH_MAX];
  return getcwd(buf, sizeof buf) ? std::string(buf) : std::string(".");
}

}  // namespace

ProbeOptions DefaultProbeOptions(const ClusterSpec& spec, double timeout_s) {
  ProbeOptions options;
  options.timeout_s = timeout_s;
  options.workdir = spec.workdir.empty() ? CurrentDirectory() : spec.workdir;
  options.clip_dir = DtrainDirectory();
  if (!spec.log_dir.empty()) {
    options.log_dir =
        spec.log_dir[0] == '/' ? spec.log_dir : CurrentDirectory() + "/" + spec.log_dir;
  }
  return options;
}

DoctorResult RunDoctor(const ClusterSpec& cluster, double timeout_s) {
  SlurmAllocation allocation;  // a batch job holding the nodes lives as long as the probes
  DoctorResult result;
  ClusterSpec with_env = cluster;
  ApplyEnvFile(with_env);  // the probe sees the ranks' variables (NCCL_SOCKET_IFNAME, PATH, ...)
  result.spec = PlaceOnSlurm(with_env, {"dtrain", "", {}}, allocation);
  const ClusterSpec& spec = result.spec;
  std::unique_ptr<Transport> transport = MakeTransport(spec);
  const ProbeOptions probe_options = DefaultProbeOptions(spec, timeout_s);
  result.run = RunProbes(spec, *transport, probe_options);
  transport.reset();  // its SSH sessions go to the pool, for the peer test's
  PeerOptions peers;
  // Every pair, or with DTRAIN_PROBE_PEERS_PARTNERS a sample: one that another run samples anew.
  peers.plan = DoctorPeerPlan(spec, std::random_device{}());
  result.run.peers = RunPeerConnections(spec, result.run.nodes, peers);
  result.run.wall_s += result.run.peers.wall_s;  // the report's time is the doctor's whole run
  result.findings = CheckCluster(spec, result.run);
  for (Finding& f : CheckRecentQuarantines(spec, probe_options.log_dir, WallMicros()))
    result.findings.push_back(std::move(f));
  return result;
}

}  // namespace dtrain
