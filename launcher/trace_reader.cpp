// A byte scanner that finds record boundaries (braces outside strings) and hands each record's
// text to nlohmann::json: constant memory whatever the file size.
#include "launcher/trace_reader.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

bool IsSpace(int c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

}  // namespace

TraceReader::TraceReader(const std::string& path) : path_(path), buffer_(kBufferBytes) {
  file_ = std::fopen(path.c_str(), "rb");
  if (!file_) throw Error(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  int c = Get();
  while (IsSpace(c)) c = Get();
  if (c == EOF) {
    // An empty file: a writer killed before its first byte. Nothing to merge, but readable.
    done_ = true;
    truncated_ = true;
    return;
  }
  if (c != '[') {
    std::fclose(file_);
    file_ = nullptr;
    throw Error(
        fmt::format("{}: not a Chrome trace-event array (starts with '{}', expected '['); "
                    "give a per-rank timeline or a Horovod timeline file",
                    path, static_cast<char>(c)));
  }
}

TraceReader::~TraceReader() {
  if (file_) std::fclose(file_);
}

int TraceReader::Get() {
  if (pos_ == len_) {
    len_ = std::fread(buffer_.data(), 1, buffer_.size(), file_);
    pos_ = 0;
    if (len_ == 0) return EOF;
  }
  ++offset_;
  return static_cast<unsigned char>(buffer_[pos_++]);
}

void TraceReader::Fail(const std::string& what) const {
  throw Error(fmt::format("{}: byte {}: {}", path_, offset_, what));
}

bool TraceReader::NextText(std::string& text) {
  if (done_) return false;
  int c = Get();
  while (IsSpace(c) || c == ',') c = Get();
  if (c == EOF || c == ']') {
    done_ = true;
    return false;
  }
  if (c != '{') Fail(fmt::format("unexpected '{}' between records", static_cast<char>(c)));
  record_start_ = offset_ - 1;
  text.assign(1, '{');
  // Scan the buffer in place and copy each stretch of the record at once.
  int depth = 1;
  bool in_string = false;
  bool escaped = false;
  while (depth > 0) {
    if (pos_ == len_) {
      len_ = std::fread(buffer_.data(), 1, buffer_.size(), file_);
      pos_ = 0;
      if (len_ == 0) {
        done_ = true;
        truncated_ = true;
        return false;
      }
    }
    const char* data = buffer_.data();
    const size_t start = pos_;
    size_t i = pos_;
    while (i < len_ && depth > 0) {
      const char b = data[i++];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (b == '\\') {
          escaped = true;
        } else if (b == '"') {
          in_string = false;
        }
      } else if (b == '"') {
        in_string = true;
      } else if (b == '{') {
        ++depth;
      } else if (b == '}') {
        --depth;
      }
    }
    text.append(data + start, i - start);
    offset_ += i - start;
    pos_ = i;
  }
  ++records_;
  return true;
}

bool TraceReader::Next(nlohmann::json& record) {
  std::string text;
  if (!NextText(text)) return false;
  try {
    record = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: record at byte {}: {}", path_, record_start_, e.what()));
  }
  return true;
}

std::string TraceReader::truncation_note() const {
  if (!truncated_) return {};
  if (records_ == 0 && record_start_ == 0) return fmt::format("{}: no complete record", path_);
  return fmt::format("{}: cut short inside the record at byte {} after {} complete records", path_,
                     record_start_, records_);
}

}  // namespace dtrain
