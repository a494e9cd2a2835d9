// ReplaceFile: a file's new contents written beside it and renamed over it, so a reader (a user's
// `cat`, a test, `dtrain status` in another process) sees the old file or the whole new one, never
// an empty or half-written one.
#pragma once

#include <string>
#include <string_view>

namespace dtrain {

// Writes `text` to PATH.tmp, then renames it to `path`. Throws Error naming the path and the
// system's reason; `what` says what the file is ("the job record", "the stall report").
void ReplaceFile(const std::string& path, std::string_view text, std::string_view what);

}  // namespace dtrain
