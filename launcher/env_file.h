// Variables every job needs, kept in a file like DeepSpeed's .deepspeed_env: `NAME=VALUE` a line,
// `#` comment lines and blank lines ignored; the value is taken as written (no quotes removed,
// nothing expanded), so it reaches every rank byte for byte.
#pragma once

#include <map>
#include <string>

#include "launcher/cluster_spec.h"

namespace dtrain {

// Throws UsageError("FILE:LINE: ...") on a line that is not NAME=VALUE or a file it cannot read.
std::map<std::string, std::string> ReadEnvFile(const std::string& path);

// The env file a launch uses when the cluster file names none: ./.dtrain_env, else
// ~/.dtrain_env; "" when neither exists.
std::string DefaultEnvFile();

// The env file of `spec` (its env_file, else DefaultEnvFile()) taken under its env, as the ranks
// get it: the file's variables join spec.env where the cluster file does not set them. Returns
// the file read, or "". Throws like ReadEnvFile.
std::string ApplyEnvFile(ClusterSpec& spec);

}  // namespace dtrain
