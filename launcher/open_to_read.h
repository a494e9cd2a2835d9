// OpenToRead: a file opened for reading without updating its access time (O_NOATIME), for the
// files dtrain reads while the job runs (a rank's log for a stall report, rank 0's metrics for its
// steps). On ext4 a read of a file written since it was last read updates the access time
// (relatime), and that waits for the journal, which waits for the drive: a read of a page in
// memory would wait for a drive that hangs under the job's folder, and the job's watch with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dtrain {

// A descriptor (O_RDONLY | O_CLOEXEC | O_NOATIME), or -1 with errno set. Where O_NOATIME is not
// allowed (a file of another user's), the file is opened without it.
int OpenToRead(const std::string& path);
// The file from byte `offset` to its end, opened so; nullopt when it cannot be opened.
std::optional<std::string> ReadToEnd(const std::string& path, uint64_t offset = 0);

}  // namespace dtrain
