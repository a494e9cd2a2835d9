// Whether a node's address names the machine dtrain runs on, so a cluster file without
// `transport:` (or `-H localhost:4`) whose nodes are all here runs locally instead of over SSH.
#pragma once

#include <string>

namespace dtrain {

// True for localhost, 127.0.0.0/8, ::1, this machine's hostname, and any address one of its
// network interfaces holds.
bool IsThisMachine(const std::string& address);

// gethostname(2); "" when it fails.
std::string ThisHostName();

}  // namespace dtrain
