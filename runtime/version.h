// The dtrain-clip version, as `dtrain-clip --version` prints it and the doctor reports it.
#pragma once

#include <string>

namespace dtrain::clip {

const char* ClipVersion();

// What this binary was built with, one `name value` per line: dtrain-clip, libtorch, cuda
// (version or none), nccl (version or none), gloo (yes or no).
std::string BuildReport();

}  // namespace dtrain::clip
