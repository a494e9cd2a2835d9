// Why a node could not be probed, sorted from the transport's error text.
#pragma once

#include <string_view>

namespace dtrain {

// Why a node could not be probed, in the words a report uses.
enum class ReachFailure {
  kNone,
  kAuth,
  kHostKey,
  kTimeout,
  kRefused,
  kUnresolved,
  kNetwork,   // no route to the host, network unreachable
  kCutShort,  // the doctor was interrupted (Ctrl-C) before the node's probe ended: not judged
  kOther
};
const char* ReachFailureName(ReachFailure failure);  // "auth", "host key", "timeout", ...
// Sorts a transport error text ("ssh: authentication failed ...") into a ReachFailure.
ReachFailure ClassifyReachError(std::string_view error);

}  // namespace dtrain
