// One `dtrain doctor` run: probe every node of a cluster through its transport, apply the
// rules, and hand back facts and findings for the report. The CLI only parses flags around it.
#pragma once

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
};

// Throws dtrain::Error only when the transport cannot be built at all (or a Slurm cluster gets
// no allocation); a node that fails is a finding. `timeout_s` bounds the whole probe.
DoctorResult RunDoctor(const ClusterSpec& spec, double timeout_s);

// The ProbeOptions RunDoctor uses: workdir = spec.workdir or the current directory, and
// dtrain-clip looked for beside the running dtrain.
ProbeOptions DefaultProbeOptions(const ClusterSpec& spec, double timeout_s);

}  // namespace dtrain
