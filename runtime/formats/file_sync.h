// Making a written file last: fsync(2) of the file before it replaces another by rename, and of
// its folder after. A failing drive's write errors are often seen by fsync alone (write(2) only
// filled the page cache), so what fsync returns decides whether the file may replace the last
// good one.
#pragma once

#include <string>

namespace dtrain::clip {

// fsync(2) of `path` (a file, or a folder for the names in it): "" or why it failed. "" too where
// the answer says nothing of the disk: a file system that cannot sync (EINVAL, ENOTSUP, ENOSYS),
// a folder this user cannot open for reading (EACCES, EPERM): a sync that cannot be done is not a
// write that failed.
std::string SyncToDisk(const std::string& path);

// The folder `path` is in ("." for a bare name).
std::string FolderOf(const std::string& path);

}  // namespace dtrain::clip
