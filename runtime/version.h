// The dtrain-clip version, as `dtrain-clip --version` prints it and the doctor reports it.
#pragma once

namespace dtrain::clip {

const char* ClipVersion();

}  // namespace dtrain::clip
