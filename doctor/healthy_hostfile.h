// `dtrain doctor --exclude-bad -o FILE`: the nodes without an error finding as a hostfile that
// `dtrain launch --hostfile FILE` reads (launcher/host_list.h), with a comment line per node left
// out saying why.
#pragma once

#include <string>
#include <vector>

#include "doctor/checks.h"
#include "doctor/probe_runner.h"

namespace dtrain {

struct HealthyHostfile {
  std::string text;                         // the file's contents
  std::vector<std::string> kept, excluded;  // host names, in cluster order
};

// A node is left out when an error finding names it (a node that could not be reached too).
// Each kept node is written as `ADDRESS slots=N` (the address is what SSH reaches), followed by
// `# HOST` when the two differ.
HealthyHostfile MakeHealthyHostfile(const ProbeRun& run, const std::vector<Finding>& findings);

// Writes `hostfile.text` to `path` and returns what it did ("wrote good.txt: 2 of 3 nodes; left
// out: gpu-c"); throws Error naming the file and why it could not.
std::string WriteHealthyHostfile(const std::string& path, const HealthyHostfile& hostfile);

}  // namespace dtrain
