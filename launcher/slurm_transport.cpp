// Placeholder until the Slurm transport lands: fails with a clear message.
#include "launcher/error.h"
#include "launcher/transport.h"

namespace dtrain {

std::unique_ptr<Transport> MakeSlurmTransport(const ClusterSpec& spec) {
  throw Error(spec.source + ": transport '" + TransportName(spec.transport) +
              "' is not available in this build");
}

}  // namespace dtrain
