// RunDoctor: cluster spec -> transport -> probes -> checks.
#include "doctor/doctor_run.h"

#include <unistd.h>

#include <climits>
#include <random>

#include "doctor/check_support.h"
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

DoctorResult RunDoctor(const ClusterSpec& cluster, double timeout_s,
                       const std::function<bool()>& cancelled) {
  SlurmAllocation allocation;  // a batch job holding the nodes lives as long as the probes
  DoctorResult result;
  ClusterSpec with_env = cluster;
  ApplyEnvFile(with_env);  // the probe sees the ranks' variables (NCCL_SOCKET_IFNAME, PATH, ...)
  result.spec = PlaceOnSlurm(with_env, {"dtrain", "", {}}, allocation);
  const ClusterSpec& spec = result.spec;
  const auto stopped = [&] { return cancelled && cancelled(); };
  std::unique_ptr<Transport> transport = MakeTransport(spec);
  ProbeOptions probe_options = DefaultProbeOptions(spec, timeout_s);
  probe_options.cancelled = cancelled;
  result.run = RunProbes(spec, *transport, probe_options);
  transport.reset();  // its SSH sessions go to the pool, for the peer test's
  const bool probes_ended = !stopped();
  if (probes_ended) {
    PeerOptions peers;
    peers.cancelled = cancelled;
    // Every pair, or with DTRAIN_PROBE_PEERS_PARTNERS a sample: one that another run samples anew.
    peers.plan = DoctorPeerPlan(spec, std::random_device{}());
    PeerRun tested = RunPeerConnections(spec, result.run.nodes, peers);
    result.run.wall_s += tested.wall_s;  // the report's time is the doctor's whole run
    // A test cut short would blame the pairs it had not finished: it is left out whole.
    if (!stopped()) result.run.peers = std::move(tested);
  }
  result.cut_short = stopped();
  result.findings = CheckCluster(spec, result.run);
  if (result.cut_short && spec.nodes.size() > 1) {
    result.findings.push_back(
        checks::Make(Severity::kWarning, "peers", "", {},
                     probes_ended ? "the connections between nodes were not judged: the doctor was "
                                    "interrupted while it tested them"
                                  : "the connections between nodes were not tested: the doctor was "
                                    "interrupted first",
                     "run `dtrain doctor` again and let it end"));
  }
  for (Finding& f : CheckRecentQuarantines(spec, probe_options.log_dir, WallMicros()))
    result.findings.push_back(std::move(f));
  return result;
}

}  // namespace dtrain
