#include "runtime/data/tar_archive.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace dtrain::clip {
namespace {

constexpr size_t kBlock = 512;

uint64_t ParseOctal(const uint8_t* field, size_t width) {
  // GNU base-256 for sizes of 8 GiB and more: high bit of the first byte set.
  if (field[0] & 0x80) {
    uint64_t value = field[0] & 0x7f;
    for (size_t i = 1; i < width; ++i) value = (value << 8) | field[i];
    return value;
  }
  uint64_t value = 0;
  for (size_t i = 0; i < width && field[i] != 0 && field[i] != ' '; ++i) {
    if (field[i] < '0' || field[i] > '7') throw std::invalid_argument("not octal");
    value = value * 8 + (field[i] - '0');
  }
  return value;
}

std::string FieldString(const uint8_t* field, size_t width) {
  size_t n = 0;
  while (n < width && field[n] != 0) ++n;
  return std::string(reinterpret_cast<const char*>(field), n);
}

uint64_t HeaderChecksum(const uint8_t* block) {
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : block[i];
  return sum;
}

// The "path" record of a pax extended header ("LEN path=NAME\n" records), or "".
std::string PaxPath(const std::vector<uint8_t>& data) {
  const std::string text(data.begin(), data.end());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t space = text.find(' ', pos);
    if (space == std::string::npos) break;
    const size_t length = std::strtoull(text.c_str() + pos, nullptr, 10);
    if (length == 0 || pos + length > text.size()) break;
    const std::string record = text.substr(space + 1, pos + length - space - 2);
    if (record.rfind("path=", 0) == 0) return record.substr(5);
    pos += length;
  }
  return "";
}

}  // namespace

TarReader::TarReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
  if (!in_) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
}

void TarReader::ReadBlock(uint8_t* block) {
  in_.read(reinterpret_cast<char*>(block), kBlock);
  const std::streamsize got = in_.gcount();
  if (got == 0) {
    throw std::runtime_error(path_ + ": truncated tar: the file ends at byte " +
                             std::to_string(offset_) + " without the end-of-archive blocks");
  }
  if (got != static_cast<std::streamsize>(kBlock)) {
    throw std::runtime_error(path_ + ": truncated tar: the file ends inside a header at byte " +
                             std::to_string(offset_ + got));
  }
  offset_ += kBlock;
}

std::vector<uint8_t> TarReader::ReadData(uint64_t size, const std::string& member) {
  std::vector<uint8_t> data(size);
  in_.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(size));
  const uint64_t padded = (size + kBlock - 1) / kBlock * kBlock;
  if (static_cast<uint64_t>(in_.gcount()) != size) {
    throw std::runtime_error(path_ + ": truncated tar: member " + member + " at byte " +
                             std::to_string(offset_) + " has " + std::to_string(in_.gcount()) +
                             " of its " + std::to_string(size) + " bytes");
  }
  in_.ignore(static_cast<std::streamsize>(padded - size));
  offset_ += padded;
  return data;
}

bool TarReader::Next(TarMember& member) {
  uint8_t block[kBlock];
  std::string long_name;
  while (true) {
    ReadBlock(block);
    bool zero = true;
    for (uint8_t b : block) zero = zero && b == 0;
    if (zero) return false;  // end of archive
    const uint64_t header_at = offset_ - kBlock;
    uint64_t size = 0, checksum = 0;
    try {
      size = ParseOctal(block + 124, 12);
      checksum = ParseOctal(block + 148, 8);
    } catch (const std::invalid_argument&) {
      throw std::runtime_error(path_ + ": corrupt tar header at byte " + std::to_string(header_at));
    }
    if (checksum != HeaderChecksum(block)) {
      throw std::runtime_error(path_ + ": corrupt tar header at byte " + std::to_string(header_at) +
                               " (checksum mismatch)");
    }
    std::string name = FieldString(block, 100);
    const std::string prefix = FieldString(block + 345, 155);
    if (std::memcmp(block + 257, "ustar", 5) == 0 && !prefix.empty()) name = prefix + "/" + name;
    if (!long_name.empty()) name = long_name;
    const char type = static_cast<char>(block[156]);
    std::vector<uint8_t> data = ReadData(size, name);
    if (type == 'x' || type == 'L') {  // the next member's name (pax or GNU)
      long_name = type == 'x' ? PaxPath(data) : FieldString(data.data(), data.size());
      continue;
    }
    if (type != '0' && type != '\0') {  // directories, links, global pax headers: not samples
      long_name.clear();
      continue;
    }
    member.name = std::move(name);
    member.data = std::move(data);
    return true;
  }
}

TarWriter::TarWriter(const std::string& path)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_) throw std::runtime_error(path + ": cannot create: " + std::strerror(errno));
}

void TarWriter::Add(const std::string& name, const std::vector<uint8_t>& data) {
  if (name.empty() || name.size() > 100) {
    throw std::runtime_error(path_ + ": member name '" + name + "' must have 1 to 100 bytes");
  }
  uint8_t block[kBlock] = {};
  std::memcpy(block, name.data(), name.size());
  std::snprintf(reinterpret_cast<char*>(block + 100), 8, "%07o", 0644);
  std::snprintf(reinterpret_cast<char*>(block + 108), 8, "%07o", 0);
  std::snprintf(reinterpret_cast<char*>(block + 116), 8, "%07o", 0);
  std::snprintf(reinterpret_cast<char*>(block + 124), 12, "%011llo",
                static_cast<unsigned long long>(data.size()));
  std::snprintf(reinterpret_cast<char*>(block + 136), 12, "%011o", 0);
  block[156] = '0';
  std::memcpy(block + 257,
              "ustar\0"
              "00",
              8);
  std::snprintf(reinterpret_cast<char*>(block + 148), 8, "%06llo",
                static_cast<unsigned long long>(HeaderChecksum(block)));
  block[155] = ' ';
  out_.write(reinterpret_cast<const char*>(block), kBlock);
  out_.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  const size_t pad = (kBlock - data.size() % kBlock) % kBlock;
  const uint8_t zeros[kBlock] = {};
  out_.write(reinterpret_cast<const char*>(zeros), static_cast<std::streamsize>(pad));
  if (!out_) throw std::runtime_error(path_ + ": write failed");
}

void TarWriter::Finish() {
  const uint8_t zeros[2 * kBlock] = {};
  out_.write(reinterpret_cast<const char*>(zeros), sizeof zeros);
  out_.close();
  if (!out_) throw std::runtime_error(path_ + ": write failed");
}

}  // namespace dtrain::clip
