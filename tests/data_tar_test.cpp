// Tar shards: our writer read by GNU tar, GNU tar's archives (ustar, pax and GNU long names)
// read by our reader, and truncation detected wherever the file is cut.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/data/tar_archive.h"

namespace dtrain::clip {
namespace {

namespace fs = std::filesystem;

class TarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/dtrain-tar-test-XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::vector<uint8_t> Bytes(const std::string& text) { return {text.begin(), text.end()}; }
  static std::vector<TarMember> ReadAll(const std::string& path) {
    TarReader reader(path);
    std::vector<TarMember> members;
    TarMember member;
    while (reader.Next(member)) members.push_back(member);
    return members;
  }
  std::string Shell(const std::string& command) {
    const std::string out = (dir_ / "shell.out").string();
    EXPECT_EQ(std::system(("cd " + dir_.string() + " && " + command + " > " + out).c_str()), 0)
        << command;
    std::ifstream in(out);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir_;
};

TEST_F(TarTest, GnuTarReadsWhatWeWrite) {
  const std::string path = (dir_ / "shard.tar").string();
  TarWriter writer(path);
  writer.Add("000001.txt", Bytes("a photo of a bag."));
  writer.Add("000001.cls", Bytes("8"));
  writer.Add("000002.txt", Bytes(std::string(1000, 'x')));
  writer.Finish();
  EXPECT_EQ(Shell("tar -tf shard.tar"), "000001.txt\n000001.cls\n000002.txt\n");
  EXPECT_EQ(Shell("tar -xOf shard.tar 000001.txt"), "a photo of a bag.");
  std::vector<TarMember> members = ReadAll(path);
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[2].data.size(), 1000u);
}

TEST_F(TarTest, ReadsGnuTarArchivesWithLongNames) {
  const std::string long_dir(120, 'd');
  fs::create_directories(dir_ / "in" / long_dir);
  std::ofstream(dir_ / "in" / long_dir / "000007.txt") << "a photo of a coat.";
  std::ofstream(dir_ / "in" / "000008.txt") << "a photo of a shirt.";
  for (const char* format : {"pax", "gnu", "ustar"}) {
    Shell(std::string("tar --format=") + format + " -C in -cf " + format + ".tar " + long_dir +
          "/000007.txt 000008.txt");
    std::vector<TarMember> members = ReadAll((dir_ / (std::string(format) + ".tar")).string());
    ASSERT_EQ(members.size(), 2u) << format;
    EXPECT_EQ(members[0].name, long_dir + "/000007.txt") << format;
    EXPECT_EQ(std::string(members[0].data.begin(), members[0].data.end()), "a photo of a coat.");
    EXPECT_EQ(members[1].name, "000008.txt") << format;
  }
}

TEST_F(TarTest, TruncationIsAnErrorWhereverTheCutFalls) {
  const std::string path = (dir_ / "shard.tar").string();
  TarWriter writer(path);
  writer.Add("a.txt", Bytes(std::string(600, 'a')));  // header 512 + data 1024
  writer.Add("b.txt", Bytes("b"));                    // at byte 1536
  writer.Finish();
  // Cut at a member boundary, inside a header, inside the data.
  for (uintmax_t size : {uintmax_t{1536}, uintmax_t{1536 + 100}, uintmax_t{700}}) {
    const std::string cut = (dir_ / ("cut-" + std::to_string(size) + ".tar")).string();
    fs::copy_file(path, cut);
    fs::resize_file(cut, size);
    try {
      ReadAll(cut);
      ADD_FAILURE() << "a tar cut at byte " << size << " was read without an error";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(cut + ": truncated tar", 0), 0u) << e.what();
    }
  }
  std::vector<uint8_t> bytes(1536, 0);
  {
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char*>(bytes.data()), 512);
  }
  bytes[130] ^= 1;  // a size digit: the checksum no longer matches
  const std::string bad = (dir_ / "bad.tar").string();
  std::ofstream(bad, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 1536);
  EXPECT_THROW(ReadAll(bad), std::runtime_error);
}

}  // namespace
}  // namespace dtrain::clip
