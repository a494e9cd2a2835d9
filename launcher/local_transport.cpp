// Placeholder until the local transport lands: fails with a clear message.
#include "launcher/error.h"
#include "launcher/transport.h"

namespace dtrain {

std::unique_ptr<Transport> MakeLocalTransport(const ClusterSpec& spec) {
  throw Error(spec.source + ": transport 'local' is not available in this build");
}

}  // namespace dtrain
