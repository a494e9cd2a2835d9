// Files dtrain-clip replaces by rename (runtime/formats/file_sync.h): one the disk did not take
// does not replace the last one it did. The disk under the weights export goes away before the
// second export, as a drive that falls off the bus (tests/support/loop_disk.h): the export is
// taken into the page cache and its fsync fails; the export must say so and leave the first file
// in place. Before, the part the disk never took was renamed over it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "runtime/formats/file_sync.h"
#include "runtime/formats/safetensors_file.h"
#include "tests/support/files.h"
#include "tests/support/loop_disk.h"

namespace dtrain::clip {
namespace {

SafetensorsTensor Filled(char c) {
  return {"visual.proj", "F32", {4, 4}, std::string(64, c)};
}

TEST(FileSync, FolderOfAPath) {
  EXPECT_EQ(FolderOf("/a/b/c.pt"), "/a/b");
  EXPECT_EQ(FolderOf("/c.pt"), "/");
  EXPECT_EQ(FolderOf("c.pt"), ".");
  EXPECT_EQ(SyncToDisk("/no/such/file"), std::strerror(ENOENT));
  EXPECT_EQ(SyncToDisk("/proc/self/status"), "") << "procfs cannot sync: EINVAL says nothing";
}

// Needs root (a loop device, a mount); skipped otherwise.
TEST(FileSync, AnExportTheDiskDidNotTakeKeepsTheLastOne) {
  if (::geteuid() != 0) GTEST_SKIP() << dtrain::testing::LoopDisk::kNeedsRoot;
  const std::string dir = ::testing::TempDir() + "/formats_file_sync_" + std::to_string(::getpid());
  {
    dtrain::testing::LoopDisk disk(dir, "16M");
    ASSERT_EQ(disk.error(), "");
    const std::string path = disk.path() + "/weights.safetensors";
    WriteSafetensors(path, {Filled('a')}, {});
    const std::string first = dtrain::testing::ReadFile(path);
    ASSERT_FALSE(first.empty());
    ASSERT_TRUE(disk.Fail()) << disk.error();
    std::string error;
    try {
      WriteSafetensors(path, {Filled('b')}, {});
    } catch (const std::runtime_error& e) {
      error = e.what();
    }
    EXPECT_NE(error.find(": cannot write: the disk did not take it (fsync: Input/output error)"),
              std::string::npos)
        << error;
    EXPECT_TRUE(dtrain::testing::ReadFile(path) == first) << "the first export was replaced";
    for (const auto& entry : std::filesystem::directory_iterator(disk.path()))
      EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dtrain::clip
