// One `dtrain doctor` run: probe every node of a cluster through its transport, apply the
// rules, and hand back facts and findings for the report. The CLI only parses flags around it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "doctor/checks.h"
#include "doctor/probe_runner.h"
#include "launcher/cluster_spec.h"

namespace dtrain {

struct DoctorResult {
  ClusterSpec spec;  // what was probed: a Slurm cluster placed on its allocation's nodes
  ProbeRun run;
  std::vector<Finding> findings;
  // `cancelled` said stop (Ctrl-C): what had not ended was killed and is not judged (its nodes
  // are ReachFailure::kCutShort, a warning), and the peer test did not run or is left out.
  bool cut_short = false;
};

// Throws dtrain::Error only when the transport cannot be built at all (or a Slurm cluster gets
// no allocation); a node that fails is a finding. `timeout_s` bounds the whole probe.
// `cancelled` (may be empty) is asked while the probes and the peer test run.
DoctorResult RunDoctor(const ClusterSpec& spec, double timeout_s,
                       const std::function<bool()>& cancelled = nullptr);

// The ProbeOptions RunDoctor uses: workdir = spec.workdir or the current directory, and
// dtrain-clip looked for beside the running dtrain.
ProbeOptions DefaultProbeOptions(const ClusterSpec& spec, double timeout_s);

}  // namespace dtrain
