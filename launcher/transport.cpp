// Picks the transport the cluster file asks for.
#include "launcher/transport.h"

namespace dtrain {

std::unique_ptr<Transport> MakeTransport(const ClusterSpec& spec, double grace_period_s,
                                         double node_timeout_s) {
  switch (spec.transport) {
    case TransportKind::kLocal:
      return MakeLocalTransport(spec);
    case TransportKind::kSsh:
      return MakeSshTransport(spec, SshWatch{grace_period_s, node_timeout_s});
    case TransportKind::kSlurm:
      return MakeSlurmTransport(spec, node_timeout_s);
  }
  return MakeSshTransport(spec, grace_period_s);
}

}  // namespace dtrain
