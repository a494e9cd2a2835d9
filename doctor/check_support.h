// Internal to the doctor: the small pieces its rule files share (checks.cpp, version_checks.cpp,
// connection_checks.cpp, node_checks.cpp). Not part of the doctor's interface, which is checks.h.
#pragma once

#include <string>
#include <vector>

#include "doctor/checks.h"

namespace dtrain::checks {

// The items separated by `sep`.
std::string Join(const std::vector<std::string>& items, const char* sep = ", ");

// The nodes the probe reached, in cluster order.
std::vector<const NodeFacts*> Reached(const std::vector<NodeFacts>& nodes);

Finding Make(Severity severity, std::string check, std::string fact, std::vector<std::string> nodes,
             std::string message, std::string remedy = "");

// Where a rule held, for its "ok" line: "every node", or "the 1 of 2 nodes checked" where the
// probe reached only some (the reach check names the others).
std::string EveryNodeChecked(size_t checked, size_t total);

// How many of the nodes a rule judged, to go before "node(s)": "all 3", or "2 of 3".
std::string AllOrSomeOf(size_t judged, size_t total);

// How often something happened: "once", "3 times".
std::string Times(long long count);

// A size given in KiB, as the findings say it: "512 MiB" below 1 GiB, else "1.5 GiB".
std::string KibSize(long long kib);

// The file name of the job's program ("dtrain-clip" when the cluster file names no command).
std::string JobProgram(const ClusterSpec& spec);

}  // namespace dtrain::checks
