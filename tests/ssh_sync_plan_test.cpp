// What a sync sends to a node (launcher/ssh/sync_plan.cpp), run locally: the archive the planner
// streams is unpacked by GNU tar into a folder that stands for the node's destination, and the
// next plan reads that folder back as the node's listing would show it (sizes, whole-second
// times, the manifest the archive left). The namespace tests (ssh_sync_real_cluster_test) run the
// same over SSH.
#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "launcher/ssh/sync_plan.h"
#include "launcher/ssh/tar_stream.h"
#include "tests/support/ssh_cluster.h"
#include "tests/support/test_paths.h"

namespace dtrain {
namespace {

namespace fs = std::filesystem;

std::string Scratch(const std::string& name) {
  const std::string dir = std::string(DTRAIN_BINARY_DIR) + "/sync-plan-unit/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Writes `text` to `path` and sets its time to `seconds` and `nanoseconds`.
void WriteAt(const std::string& path, const std::string& text, time_t seconds, long nanoseconds) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  const timespec times[2] = {{seconds, nanoseconds}, {seconds, nanoseconds}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// What the node's listing says of `dest`: each file's size and whole-second time, and the
// manifest the last archive left there.
NodeState Listing(const std::string& dest) {
  NodeState state;
  state.kind = "have";
  for (const auto& e : fs::recursive_directory_iterator(dest)) {
    const std::string rel = fs::relative(e.path(), dest).string();
    if (!e.is_regular_file() || rel.rfind(".dtrain-sync", 0) == 0) continue;
    struct stat st;
    ::lstat(e.path().c_str(), &st);
    state.files[rel] = {static_cast<uint64_t>(st.st_size), st.st_mtim.tv_sec};
  }
  const std::string manifest = test::ReadText(dest + "/" + kSyncManifest);
  for (size_t at = 0; at < manifest.size();) {
    const size_t end = manifest.find('\0', at);
    std::string path;
    ManifestEntry entry;
    if (ParseManifestRecord(manifest.substr(at, end - at), path, entry))
      state.manifest[path] = entry;
    at = end + 1;
  }
  return state;
}

// Plans a sync of `src` to a node that holds `dest` and, as the node does, unpacks what comes and
// deletes what it lists.
NodeSyncResult Sync(const std::string& src, const std::string& dest) {
  NodeSyncResult result;
  SyncPlanner planner(ScanSyncSource(src, ""));
  std::shared_ptr<TarStream> stream = planner.Plan(Listing(dest), result);
  if (!stream) return result;
  std::string archive;
  while (stream->Next(archive, 1 << 16)) {
  }
  std::ofstream(dest + ".tar", std::ios::binary | std::ios::trunc) << archive;
  EXPECT_EQ(test::RunOutput("tar -xf " + dest + ".tar -C " + dest + " 2>&1 && echo ok"), "ok\n");
  // The deletions, as the node's script makes them.
  const std::string list = std::string(kSyncDeleteList);
  test::RunOutput("cd " + dest + " && if [ -f " + list + " ]; then xargs -0 -r rm -f -- <" + list +
                  " && rm -f " + list + "; fi");
  return result;
}

TEST(SyncPlan, ManifestRecordsRoundTripWithAndWithoutNanoseconds) {
  std::string path;
  ManifestEntry e;
  const std::string with = ManifestRecord({"ab12", 10, 1700000000, 5}, "dir/a b.py");
  EXPECT_EQ(with, std::string("ab12 10 1700000000.000000005 dir/a b.py") + '\0');
  ASSERT_TRUE(ParseManifestRecord(with.substr(0, with.size() - 1), path, e));
  EXPECT_EQ(path, "dir/a b.py");
  EXPECT_EQ(e.hash, "ab12");
  EXPECT_EQ(e.size, 10u);
  EXPECT_EQ(e.mtime, 1700000000);
  EXPECT_EQ(e.local_ns, 5);
  // A manifest an earlier version wrote: no fraction, nanoseconds unknown.
  ASSERT_TRUE(ParseManifestRecord("ab12 10 1700000000  lead.py", path, e));
  EXPECT_EQ(path, " lead.py");
  EXPECT_EQ(e.local_ns, -1);
  EXPECT_EQ(ManifestRecord(e, path), std::string("ab12 10 1700000000  lead.py") + '\0');
  EXPECT_FALSE(ParseManifestRecord("ab12 10 1700000000.5 a.py", path, e));
  EXPECT_FALSE(ParseManifestRecord("ab12 10 1700000000", path, e));
  EXPECT_FALSE(ParseManifestRecord("ab12 ten 1700000000 a.py", path, e));
}

// The sync after a same-size edit made within the second of the last one: the node's copy has
// the same size and whole-second time, so only the nanoseconds the manifest kept tell the edit.
TEST(SyncPlan, ASameSizeEditWithinTheSecondOfTheLastSyncIsSent) {
  const std::string src = Scratch("src"), dest = Scratch("dest");
  const time_t second = 1700000000;
  WriteAt(src + "/config.py", "LR = 0.1\n", second, 100000000);
  WriteAt(src + "/model.py", "DEPTH = 12\n", second, 100000000);
  NodeSyncResult r = Sync(src, dest);
  EXPECT_EQ(r.files_sent, 2);
  EXPECT_EQ(test::ReadText(dest + "/config.py"), "LR = 0.1\n");

  r = Sync(src, dest);
  EXPECT_EQ(r.files_sent, 0);
  EXPECT_EQ(r.files_unchanged, 2);

  // Python's cache on the node checks the same size and second: config's goes, model's stays.
  fs::create_directories(dest + "/__pycache__");
  for (const char* name : {"config.cpython-311.pyc", "config.cpython-312.opt-1.pyc",
                           "model.cpython-311.pyc", "config.cpython-311.pyc.keep"})
    std::ofstream(dest + "/__pycache__/" + name) << "cached";
  WriteAt(src + "/config.py", "LR = 0.2\n", second, 600000000);
  r = Sync(src, dest);
  EXPECT_EQ(r.files_sent, 1);
  EXPECT_EQ(r.files_unchanged, 1);
  EXPECT_EQ(r.files_deleted, 0) << "a cache is not the user's file";
  EXPECT_EQ(test::ReadText(dest + "/config.py"), "LR = 0.2\n");
  EXPECT_EQ(test::RunOutput("ls " + dest + "/__pycache__"),
            "config.cpython-311.pyc.keep\nmodel.cpython-311.pyc\n");

  // Touched within the second, same bytes: the hash says nothing changed, nothing is sent.
  WriteAt(src + "/model.py", "DEPTH = 12\n", second, 700000000);
  r = Sync(src, dest);
  EXPECT_EQ(r.files_sent, 0);
  EXPECT_EQ(r.files_unchanged, 2);
}

// A node whose manifest an earlier version wrote (no nanoseconds) keeps the size-and-second check
// for its files, and the next archive's manifest records the nanoseconds.
TEST(SyncPlan, AManifestWithoutNanosecondsIsReadAndRewrittenWithThem) {
  const std::string src = Scratch("old-src"), dest = Scratch("old-dest");
  const time_t second = 1700000000;
  WriteAt(src + "/a.py", "A = 1\n", second, 250000000);
  WriteAt(src + "/b.py", "B = 1\n", second, 250000000);
  Sync(src, dest);
  std::string manifest = test::ReadText(dest + "/" + kSyncManifest);
  ASSERT_NE(manifest.find(" 1700000000.250000000 a.py"), std::string::npos) << manifest;
  for (size_t at; (at = manifest.find(".250000000")) != std::string::npos;) manifest.erase(at, 10);
  std::ofstream(dest + "/" + kSyncManifest, std::ios::binary | std::ios::trunc) << manifest;

  NodeSyncResult r = Sync(src, dest);
  EXPECT_EQ(r.files_sent, 0);
  EXPECT_EQ(r.files_unchanged, 2);
  WriteAt(src + "/b.py", "B = 22\n", second, 900000000);  // a size that differs is always seen
  r = Sync(src, dest);
  EXPECT_EQ(r.files_sent, 1);
  manifest = test::ReadText(dest + "/" + kSyncManifest);
  EXPECT_NE(manifest.find(" 1700000000.250000000 a.py"), std::string::npos) << manifest;
  EXPECT_NE(manifest.find(" 1700000000.900000000 b.py"), std::string::npos) << manifest;
}

}  // namespace
}  // namespace dtrain
