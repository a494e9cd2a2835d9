// ustar headers are 512-byte blocks with octal fields and a checksum; a name longer than the
// 100-byte field (or a size past 8 GiB) gets a pax 'x' record before its header, which GNU tar,
// bsdtar and busybox tar all read.
#include "launcher/ssh/tar_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace dtrain {
namespace {

constexpr size_t kBlock = 512;

void Octal(char* field, size_t width, uint64_t value) {
  std::string text = fmt::format("{:0{}o}", value, width - 1);
  std::memcpy(field, text.data(), std::min(text.size(), width - 1));
}

std::string Header(const std::string& name, uint64_t size, int64_t mtime, unsigned mode, char type,
                   const std::string& link_target = "") {
  char block[kBlock] = {};
  std::memcpy(block, name.data(), std::min<size_t>(name.size(), 100));
  std::memcpy(block + 157, link_target.data(), std::min<size_t>(link_target.size(), 100));
  Octal(block + 100, 8, mode & 07777);
  Octal(block + 108, 8, 0);
  Octal(block + 116, 8, 0);
  Octal(block + 124, 12, size < 077777777777ULL ? size : 0);
  Octal(block + 136, 12, mtime > 0 ? static_cast<uint64_t>(mtime) : 0);
  std::memset(block + 148, ' ', 8);
  block[156] = type;
  std::memcpy(block + 257,
              "ustar\0"
              "00",
              8);
  unsigned sum = 0;
  for (unsigned char c : block) sum += c;
  std::string check = fmt::format("{:06o}", sum);
  std::memcpy(block + 148, check.data(), 6);
  block[154] = '\0';
  return std::string(block, kBlock);
}

// "LEN key=value\n" where LEN counts the whole record, its own digits included.
std::string PaxRecord(const std::string& key, const std::string& value) {
  const size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
  size_t length = body + 1;
  while (std::to_string(length).size() + body != length) ++length;
  return fmt::format("{} {}={}\n", length, key, value);
}

std::string Padding(uint64_t size) {
  return std::string((kBlock - size % kBlock) % kBlock, '\0');
}

std::string Hex(const unsigned char* bytes, unsigned length) {
  std::string out;
  for (unsigned i = 0; i < length; ++i) out += fmt::format("{:02x}", bytes[i]);
  return out;
}

}  // namespace

std::string FileSha256(const std::string& path, const std::atomic<bool>* stop) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  char buffer[1 << 16];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) {
    EVP_DigestUpdate(ctx, buffer, n);
    if (stop && *stop) {
      n = -1;
      break;
    }
  }
  ::close(fd);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  return n < 0 ? "" : Hex(digest, length);
}

TarStream::TarStream(std::vector<TarEntry> entries, std::shared_ptr<ContentHashes> hashes,
                     std::function<std::vector<TarEntry>()> finish)
    : entries_(std::move(entries)), hashes_(std::move(hashes)), finish_(std::move(finish)) {}

TarStream::~TarStream() {
  if (fd_ >= 0) ::close(fd_);
  if (digest_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(digest_));
}

void TarStream::BeginEntry() {
  const TarEntry& e = entries_[index_];
  std::string pax;
  if (e.name.size() > 99) pax += PaxRecord("path", e.name);
  if (e.size >= 077777777777ULL) pax += PaxRecord("size", std::to_string(e.size));
  if (e.link_target.size() > 99) pax += PaxRecord("linkpath", e.link_target);
  if (!pax.empty()) {
    header_ += Header("././@PaxHeader", pax.size(), e.mtime, 0644, 'x') + pax + Padding(pax.size());
  }
  if (!e.link_target.empty()) {
    header_ += Header(e.name, 0, e.mtime, 0777, '2', e.link_target);
    data_left_ = 0;
    padding_ = 0;
    return;
  }
  header_ += Header(e.name, e.size, e.mtime, e.mode, '0');
  data_left_ = e.size;
  padding_ = Padding(e.size).size();
  if (e.source.empty()) return;
  fd_ = ::open(e.source.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0 && read_error_.empty()) {
    read_error_ = fmt::format("{}: {}", e.source, std::strerror(errno));
  }
  if (fd_ >= 0 && hashes_ && !hashes_->count(e.name)) {
    auto* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    digest_ = ctx;
  }
}

void TarStream::EndFile() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!digest_) return;
  auto* ctx = static_cast<EVP_MD_CTX*>(digest_);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  digest_ = nullptr;
  (*hashes_)[entries_[index_].name] = Hex(digest, length);
}

bool TarStream::Next(std::string& out, size_t max) {
  const size_t start = out.size();
  while (out.size() - start < max) {
    if (!header_.empty()) {
      const size_t n = std::min(header_.size(), max - (out.size() - start));
      out.append(header_, 0, n);
      header_.erase(0, n);
      continue;
    }
    if (data_left_ > 0) {
      const TarEntry& e = entries_[index_];
      const size_t want =
          static_cast<size_t>(std::min<uint64_t>(data_left_, max - (out.size() - start)));
      const size_t at = out.size();
      out.resize(at + want);
      size_t got = 0;
      if (e.source.empty()) {
        std::memcpy(out.data() + at, e.data.data() + (e.size - data_left_), want);
        got = want;
      } else if (fd_ >= 0) {
        const ssize_t n = ::read(fd_, out.data() + at, want);
        if (n > 0) got = static_cast<size_t>(n);
        if (digest_ && n > 0)
          EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(digest_), out.data() + at, n);
      }
      if (got == 0) {  // the file shrank or cannot be read: zeros keep the archive whole
        std::memset(out.data() + at, 0, want);
        got = want;
        if (digest_) {  // its hash would be wrong: leave it unknown so the next sync sends it
          EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(digest_));
          digest_ = nullptr;
        }
      }
      out.resize(at + got);
      data_left_ -= got;
      continue;
    }
    if (index_ < entries_.size()) {
      if (!begun_) {
        begun_ = true;
        BeginEntry();
        continue;
      }
      EndFile();  // its data is all out: padding to the block, then the next entry
      header_ = std::string(padding_, '\0');
      padding_ = 0;
      begun_ = false;
      ++index_;
      continue;
    }
    if (!finished_) {
      finished_ = true;
      if (finish_) {
        for (TarEntry& e : finish_()) entries_.push_back(std::move(e));
      }
      continue;
    }
    if (!trailer_done_) {
      trailer_done_ = true;
      header_ = std::string(2 * kBlock, '\0');
      continue;
    }
    break;
  }
  bytes_given_ += out.size() - start;
  return out.size() > start || !header_.empty();
}

}  // namespace dtrain
