// The doctor's report: a table (one row per node, one column per fact, odd cells highlighted)
// followed by the findings; or the same facts and findings as JSON (schema in dtrain-doctor(1)).
#pragma once

#include <string>
#include <vector>

#include "doctor/checks.h"
#include "doctor/probe_runner.h"
#include "launcher/cluster_spec.h"

namespace dtrain {

// 1 when any finding is an error, else 0 (warnings keep 0).
int DoctorExitStatus(const std::vector<Finding>& findings);

// `colour`: ANSI colours for odd cells and severities; without it odd cells carry a '*'.
std::string RenderTextReport(const ClusterSpec& spec, const ProbeRun& run,
                             const std::vector<Finding>& findings, bool colour);

std::string RenderJsonReport(const ClusterSpec& spec, const ProbeRun& run,
                             const std::vector<Finding>& findings);

}  // namespace dtrain
