// The commented cluster-file templates shipped inside the binary (templates/cluster-*.yaml),
// and `dtrain init`'s one effect: writing one of them to a file that does not exist yet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// The names `dtrain init --template` accepts: local, ssh, slurm.
std::vector<std::string> ClusterTemplateNames();
// Throws UsageError for an unknown name.
std::string_view ClusterTemplate(const std::string& name);
// Writes template `name` to `path` ("-" = stdout). Refuses to replace an existing file unless
// `force`; throws Error naming the path and the reason.
void WriteClusterTemplate(const std::string& name, const std::string& path, bool force);

}  // namespace dtrain
