// Variables every job needs, kept in a file like DeepSpeed's .deepspeed_env: `NAME=VALUE` a line,
// `#` comment lines and blank lines ignored; the value is taken as written (no quotes removed,
// nothing expanded), so it reaches every rank byte for byte.
#pragma once

#include <map>
#include <string>

namespace dtrain {

// Throws UsageError("FILE:LINE: ...") on a line that is not NAME=VALUE or a file it cannot read.
std::map<std::string, std::string> ReadEnvFile(const std::string& path);

// The env file a launch uses when the cluster file names none: ./.dtrain_env, else
// ~/.dtrain_env; "" when neither exists.
std::string DefaultEnvFile();

}  // namespace dtrain
