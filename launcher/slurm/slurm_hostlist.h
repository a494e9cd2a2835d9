// Slurm hostlist expressions ("node[01-03,07],gpu-a") expanded to host names, in Slurm's order.
// Throws dtrain::Error naming the expression when the brackets or ranges are malformed.
#pragma once

#include <string>
#include <vector>

namespace dtrain {

// "node[01-03,07],login" -> node01 node02 node03 node07 login. Zero padding follows the
// range's first bound; several bracket groups in one name expand as a product
// ("r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2). Empty text gives no hosts.
std::vector<std::string> ExpandHostlist(const std::string& hostlist);

}  // namespace dtrain
