// Placeholder until the Ssh transport lands: fails with a clear message.
#include "launcher/error.h"
#include "launcher/transport.h"

namespace dtrain {

std::unique_ptr<Transport> MakeSshTransport(const ClusterSpec& spec) {
  throw Error(spec.source + ": transport '" + TransportName(spec.transport) +
              "' is not available in this build");
}

}  // namespace dtrain
