// torchrun's options for its own agent and its plugins. The duplicate filters dtrain does
// (filtered_output.h); the others it has no counterpart for. They are accepted where a torchrun
// command line pasted after `dtrain launch` should still run (the option changes nothing a rank
// sees, or dtrain does the same another way: said in a note), and refused, with why and what to do,
// where dtrain does not do what the option asks.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

struct TorchrunAgentOptions {
  std::string start_method;       // --start-method spawn|fork|forkserver: a script is its own
                                  // process either way, under torchrun too
  bool run_path = false;          // --run-path: the script runs in a fresh interpreter either way
  std::string event_log_handler;  // --event-log-handler: dtrain's events go to job.json
  std::string local_addr;         // --local-addr: a node's address is the cluster file's
  std::string logs_specs;         // --logs-specs: refused (a Python plugin of torchrun's logs)
  std::string numa_binding;       // --numa-binding MODE: numa_binding.h ("" = none);
                                  // exclusive and core-complex refused
  std::string duplicate_stdout_filters;  // done: filtered_output.h ("" = not given)
  std::string duplicate_stderr_filters;
};

// The notes to print for the accepted options that do not apply. Throws UsageError for a
// refused one.
std::vector<std::string> TorchrunAgentNotes(const TorchrunAgentOptions& options);

}  // namespace dtrain
