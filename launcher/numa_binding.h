// torchrun's --numa-binding: each rank bound to the CPUs near its GPU before it starts
// (templates/numa_binding.sh, run on the rank's node on every transport), by torch/numa/binding.py's
// modes: node, socket, exclusive and core-complex.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

// Throws UsageError for a mode that is none of torch's; "" passes (no binding).
void CheckNumaBinding(const std::string& mode);

// `argv` run under the binding: {"sh", "-c", <script>, "dtrain-numa-binding", mode,
// <this dtrain's folder>, "--", argv...}, the same for every rank. dtrain's own programs given by
// bare name are found as the rank's node finds them (templates/dtrain_program.sh).
std::vector<std::string> UnderNumaBinding(const std::vector<std::string>& argv,
                                          const std::string& mode);

}  // namespace dtrain
