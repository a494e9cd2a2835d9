#include "runtime/version.h"

namespace dtrain::clip {

const char* ClipVersion() { return DTRAIN_CLIP_VERSION; }

}  // namespace dtrain::clip
