// Making a written file last: fsync(2) of the file before it replaces another by rename, and of
// its folder after. A failing drive's write errors are often seen by fsync alone (write(2) only
// filled the page cache), so what fsync returns decides whether the file may replace the last
// good one. And a write the disk may refuse (full, failing), taken as far as it goes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dtrain::clip {

// fsync(2) of `path` (a file, or a folder for the names in it): "" or why it failed. "" too where
// the answer says nothing of the disk: a file system that cannot sync (EINVAL, ENOTSUP, ENOSYS),
// a folder this user cannot open for reading (EACCES, EPERM): a sync that cannot be done is not a
// write that failed.
std::string SyncToDisk(const std::string& path);

// Whether an fsync's or open's errno says nothing of the disk (the cases above).
bool SaysNothingOfTheDisk(int error);

// write(2) of `bytes` to `fd` until all are written or the disk refuses more: how many it took;
// `error` says why it stopped short (strerror: "No space left on device").
size_t WriteWhatTheDiskTakes(int fd, std::string_view bytes, std::string& error);

// The folder `path` is in ("." for a bare name).
std::string FolderOf(const std::string& path);

}  // namespace dtrain::clip
