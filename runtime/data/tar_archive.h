// POSIX (ustar) tar archives, the container of WebDataset shards: a streaming reader of regular
// members (with pax and GNU long names) and a writer for the shards export-data produces.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace dtrain::clip {

struct TarMember {
  std::string name;
  std::vector<uint8_t> data;
};

// Reads members in order. Next throws std::runtime_error naming the archive and the byte offset
// for a truncated archive, a bad header checksum or an unreadable file.
class TarReader {
 public:
  explicit TarReader(const std::string& path);
  // False at the end of the archive (its zero blocks). A file that stops before them, even at a
  // member boundary, is truncated.
  bool Next(TarMember& member);
  const std::string& path() const { return path_; }

 private:
  void ReadBlock(uint8_t* block);
  std::vector<uint8_t> ReadData(uint64_t size, const std::string& member);

  std::string path_;
  std::ifstream in_;
  uint64_t offset_ = 0;
};

// Writes regular-file members and, on Finish, the two closing zero blocks. Names up to 100 bytes.
class TarWriter {
 public:
  explicit TarWriter(const std::string& path);
  void Add(const std::string& name, const std::vector<uint8_t>& data);
  void Finish();

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace dtrain::clip
