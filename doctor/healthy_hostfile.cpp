// The nodes the doctor found fit, as a hostfile.
#include "doctor/healthy_hostfile.h"

#include <map>

#include <fmt/format.h>

#include "launcher/file_replace.h"

namespace dtrain {

HealthyHostfile MakeHealthyHostfile(const ProbeRun& run, const std::vector<Finding>& findings) {
  const std::map<std::string, std::string> why = ErrorsByNode(findings);
  HealthyHostfile out;
  out.text =
      "# Written by dtrain doctor --exclude-bad: the nodes without an error, for\n"
      "# dtrain launch --hostfile (with -c CLUSTER_FILE for its ssh settings).\n";
  for (const NodeFacts& n : run.nodes) {
    auto it = why.find(n.host);
    if (it == why.end()) {
      out.kept.push_back(n.host);
      out.text += fmt::format("{} slots={}{}\n", n.address, n.slots,
                              n.address == n.host ? "" : "  # " + n.host);
      continue;
    }
    out.excluded.push_back(n.host);
    out.text += fmt::format("# excluded {}: {}\n", n.host, it->second);
  }
  return out;
}

std::string WriteHealthyHostfile(const std::string& path, const HealthyHostfile& hostfile) {
  // Replaced whole: a launch reading it while the doctor runs again (from cron, say) gets the old
  // list or the new one.
  ReplaceFile(path, hostfile.text, "the hostfile");
  std::string left_out;
  for (const std::string& host : hostfile.excluded)
    left_out += (left_out.empty() ? "" : ", ") + host;
  return fmt::format("wrote {}: {} of {} nodes{}{}", path, hostfile.kept.size(),
                     hostfile.kept.size() + hostfile.excluded.size(),
                     left_out.empty() ? "" : "; left out: ", left_out);
}

}  // namespace dtrain
