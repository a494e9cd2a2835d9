#include "launcher/numa_binding.h"

#include <fmt/format.h>

#include "launcher/error.h"
#include "launcher/local/local_transport.h"
#include "launcher/ssh/remote_command.h"

namespace dtrain {

std::string_view NumaBindingScript();  // templates/numa_binding.sh, embedded

void CheckNumaBinding(const std::string& mode) {
  if (mode.empty() || mode == "node" || mode == "socket" || mode == "exclusive" ||
      mode == "core-complex") {
    return;
  }
  throw UsageError(fmt::format(
      "--numa-binding {}: expected node, socket, exclusive or core-complex (torchrun's modes)",
      mode));
}

std::vector<std::string> UnderNumaBinding(const std::vector<std::string>& argv,
                                          const std::string& mode) {
  std::vector<std::string> out = {
      "sh",
      "-c",
      std::string(DtrainProgramLookup()) + std::string(NumaBindingScript()),
      "dtrain-numa-binding",
      mode,
      SelfExecutableDir(),
      "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace dtrain
