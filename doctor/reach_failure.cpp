// Transport errors -> the reason a node was not reached.
#include "doctor/reach_failure.h"

#include <cctype>
#include <string>

namespace dtrain {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

const char* ReachFailureName(ReachFailure failure) {
  switch (failure) {
    case ReachFailure::kNone:
      return "";
    case ReachFailure::kAuth:
      return "auth";
    case ReachFailure::kHostKey:
      return "host key";
    case ReachFailure::kTimeout:
      return "timeout";
    case ReachFailure::kRefused:
      return "refused";
    case ReachFailure::kUnresolved:
      return "unknown host";
    case ReachFailure::kNetwork:
      return "network";
    case ReachFailure::kCutShort:
      return "cut short";
    case ReachFailure::kOther:
      return "other";
  }
  return "other";
}

ReachFailure ClassifyReachError(std::string_view error) {
  std::string e = Lower(error);
  if (Contains(e, "host key") || Contains(e, "known_hosts") || Contains(e, "known hosts")) {
    return ReachFailure::kHostKey;
  }
  // Before auth: "no reply while authenticating within 5 s (ssh.connect_timeout)" is a timeout.
  if (Contains(e, "timed out") || Contains(e, "timeout")) return ReachFailure::kTimeout;
  if (Contains(e, "auth") || Contains(e, "permission denied") || Contains(e, "publickey") ||
      Contains(e, "password")) {
    return ReachFailure::kAuth;
  }
  if (Contains(e, "refused")) return ReachFailure::kRefused;
  if (Contains(e, "unreachable") || Contains(e, "no route")) return ReachFailure::kNetwork;
  if (Contains(e, "resolve") || Contains(e, "name or service") || Contains(e, "unknown host")) {
    return ReachFailure::kUnresolved;
  }
  return ReachFailure::kOther;
}

}  // namespace dtrain
