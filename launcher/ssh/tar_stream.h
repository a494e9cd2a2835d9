// TarStream: a POSIX tar archive (ustar, with pax records for long names and large sizes) made
// while it is read, so a tree of any size goes to a node without being held in memory. Files
// are read when their turn comes; each one's SHA-256 is computed on the way (content hashes for
// workdir_sync's manifest), once per file whichever stream reads it first.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "launcher/transport.h"

namespace dtrain {

// Content hashes shared by the streams of one sync: path -> hex SHA-256.
using ContentHashes = std::map<std::string, std::string>;

struct TarEntry {
  std::string name;    // path inside the archive ("a/b.py")
  std::string source;  // file to read; "" = `data`
  std::string data;    // contents when there is no source
  uint64_t size = 0;   // bytes the archive promises (a file that shrank is padded with zeros)
  int64_t mtime = 0;   // seconds since the epoch
  unsigned mode = 0644;
  std::string link_target;  // non-empty: a symbolic link to this (no data, size 0)
};

class TarStream : public StdinSource {
 public:
  // `finish` is called after the last entry's data and may add entries (the manifest, which
  // needs the hashes computed while streaming).
  TarStream(std::vector<TarEntry> entries, std::shared_ptr<ContentHashes> hashes,
            std::function<std::vector<TarEntry>()> finish);
  ~TarStream() override;
  bool Next(std::string& out, size_t max) override;
  uint64_t bytes_given() const { return bytes_given_; }
  // Why a file could not be read ("" when all were), e.g. "a.py: Permission denied".
  const std::string& read_error() const { return read_error_; }

 private:
  void BeginEntry();
  void EndFile();

  std::vector<TarEntry> entries_;
  std::shared_ptr<ContentHashes> hashes_;
  std::function<std::vector<TarEntry>()> finish_;
  bool finished_ = false;
  size_t index_ = 0;
  bool begun_ = false;      // entries_[index_]'s header was made
  std::string header_;      // pending header (and padding) bytes
  uint64_t data_left_ = 0;  // of the current entry
  uint64_t padding_ = 0;
  int fd_ = -1;
  void* digest_ = nullptr;  // EVP_MD_CTX while hashing the current file
  bool trailer_done_ = false;
  uint64_t bytes_given_ = 0;
  std::string read_error_;
};

// Hex SHA-256 of a file, or "" when it cannot be read or `*stop` turned true while it was read.
std::string FileSha256(const std::string& path, const std::atomic<bool>* stop = nullptr);

}  // namespace dtrain
