#include "launcher/torchrun_agent_options.h"

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/numa_binding.h"

namespace dtrain {

std::vector<std::string> TorchrunAgentNotes(const TorchrunAgentOptions& options) {
  if (!options.logs_specs.empty()) {
    throw UsageError(fmt::format(
        "--logs-specs {}: names a Python plugin for torchrun's own log files; dtrain writes "
        "every rank's output to <log_dir>/<job>/rank-R.log (dtrain logs reads them): leave it "
        "out",
        options.logs_specs));
  }
  CheckNumaBinding(options.numa_binding);
  std::vector<std::string> notes;
  if (!options.local_addr.empty()) {
    notes.push_back(fmt::format(
        "--local-addr {} is not used: dtrain reaches each node at its address in the cluster "
        "file (or -H, --hostfile), and MASTER_ADDR is the first node's",
        options.local_addr));
  }
  if (!options.event_log_handler.empty()) {
    notes.push_back(
        fmt::format("--event-log-handler {} is not used: dtrain records the job's events in "
                    "<log_dir>/<job>/job.json (dtrain status shows them)",
                    options.event_log_handler));
  }
  return notes;
}

}  // namespace dtrain
