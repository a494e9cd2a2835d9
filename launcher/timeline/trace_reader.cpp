// A byte scanner that finds record boundaries (braces outside strings) and hands each record's
// text to nlohmann::json: constant memory whatever the file size. zlib reads the bytes, so a
// gzip-compressed trace streams the same way as a plain one.
#include "launcher/timeline/trace_reader.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <zlib.h>

#include "launcher/error.h"

namespace dtrain {
namespace {

constexpr size_t kBufferBytes = 1 << 20;

// Bytes the record scanner stops at: outside strings the quote and braces, inside them the
// quote and the backslash.
struct ByteSet {
  bool in[256] = {};
  constexpr explicit ByteSet(std::string_view bytes) {
    for (char b : bytes) in[static_cast<unsigned char>(b)] = true;
  }
  constexpr bool operator[](unsigned char b) const { return in[b]; }
};
constexpr ByteSet kStructureStop("\"{}");
constexpr ByteSet kStringStop("\"\\");

bool IsSpace(int c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

gzFile Gz(void* file) {
  return static_cast<gzFile>(file);
}

}  // namespace

TraceReader::TraceReader(const std::string& path) : path_(path), buffer_(kBufferBytes) {
  file_ = gzopen(path.c_str(), "rb");
  if (!file_) throw Error(fmt::format("{}: cannot open ({})", path, std::strerror(errno)));
  // The destructor does not run for a constructor that throws: zlib's state is closed here.
  try {
    gzbuffer(Gz(file_), 1 << 18);
    int c = SkipSpace();
    if (c == EOF) {
      // An empty file: a writer killed before its first byte. Nothing to merge, but readable.
      done_ = true;
      truncated_ = true;
      return;
    }
    if (c == '{') {
      object_form_ = true;
      if (!ReadMembersUntilEvents()) {
        done_ = true;
        if (!truncated_) return;  // an object without records
      }
      return;
    }
    if (c != '[') {
      throw Error(
          fmt::format("{}: not a Chrome trace (starts with '{}', expected '[' or '{{'); give a "
                      "per-rank timeline, a Horovod timeline or a PyTorch profiler trace",
                      path, static_cast<char>(c)));
    }
  } catch (...) {
    gzclose(Gz(file_));
    file_ = nullptr;
    throw;
  }
}

TraceReader::~TraceReader() {
  if (file_) gzclose(Gz(file_));
}

bool TraceReader::Refill() {
  int n = gzread(Gz(file_), buffer_.data(), static_cast<unsigned>(buffer_.size()));
  pos_ = 0;
  if (n < 0) {
    int code = 0;
    const char* what = gzerror(Gz(file_), &code);
    // A gzip stream cut short reads as the end of the file; the scanner reports the truncation.
    if (code != Z_BUF_ERROR) Fail(fmt::format("cannot decompress ({})", what));
    n = 0;
  }
  len_ = static_cast<size_t>(n);
  return len_ > 0;
}

int TraceReader::Get() {
  if (pos_ == len_ && !Refill()) return EOF;
  ++offset_;
  return static_cast<unsigned char>(buffer_[pos_++]);
}

int TraceReader::SkipSpace() {
  int c = Get();
  while (IsSpace(c)) c = Get();
  return c;
}

void TraceReader::Fail(const std::string& what) const {
  throw Error(fmt::format("{}: byte {}: {}", path_, offset_, what));
}

std::string TraceReader::ValueText(int first) {
  std::string text(1, static_cast<char>(first));
  if (first == '"') {
    bool escaped = false;
    for (int c = Get();; c = Get()) {
      if (c == EOF) return truncated_ = true, text;
      text += static_cast<char>(c);
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        return text;
      }
    }
  }
  if (first != '{' && first != '[') {  // a number, true, false, null
    while (pos_ < len_ || Refill()) {
      char c = buffer_[pos_];
      if (c == ',' || c == '}' || c == ']' || IsSpace(c)) return text;
      text += c;
      ++pos_;
      ++offset_;
    }
    truncated_ = true;
    return text;
  }
  int depth = 1;
  bool in_string = false;
  bool escaped = false;
  while (depth > 0) {
    int c = Get();
    if (c == EOF) return truncated_ = true, text;
    text += static_cast<char>(c);
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return text;
}

bool TraceReader::ReadMembersUntilEvents() {
  for (;;) {
    int c = SkipSpace();
    while (c == ',') c = SkipSpace();
    if (c == '}') return false;
    if (c == EOF) {
      truncated_ = true;
      return false;
    }
    if (c != '"') Fail(fmt::format("expected a member name, found '{}'", static_cast<char>(c)));
    std::string key_text = ValueText(c);
    if (truncated_) return false;
    if (SkipSpace() != ':') Fail("expected ':' after a member name");
    std::string key;
    try {
      key = nlohmann::json::parse(key_text).get<std::string>();
    } catch (const nlohmann::json::exception& e) {
      Fail(fmt::format("bad member name: {}", e.what()));
    }
    int first = SkipSpace();
    if (key == "traceEvents") {
      if (first != '[') Fail("\"traceEvents\" is not an array");
      return true;
    }
    if (first == EOF) {
      truncated_ = true;
      return false;
    }
    std::string value = ValueText(first);
    if (truncated_) return false;
    try {
      header_[key] = nlohmann::json::parse(value);
    } catch (const nlohmann::json::exception& e) {
      Fail(fmt::format("member \"{}\": {}", key, e.what()));
    }
  }
}

bool TraceReader::NextText(std::string& text) {
  std::string_view view;
  if (!NextView(view)) return false;
  text.assign(view);
  return true;
}

bool TraceReader::NextView(std::string_view& view) {
  if (done_) return false;
  int c = Get();
  while (IsSpace(c) || c == ',') c = Get();
  if (c == EOF || c == ']') {
    done_ = true;
    // The object form goes on after the array; a file that stops before its closing brace
    // was cut short.
    if (object_form_ && (c == EOF || ReadMembersUntilEvents() || truncated_)) {
      truncated_ = true;
      record_start_ = offset_;
    }
    return false;
  }
  if (c != '{') Fail(fmt::format("unexpected '{}' between records", static_cast<char>(c)));
  record_start_ = offset_ - 1;
  // Scan the buffer in place, jumping from one byte that matters to the next; a record that
  // lies whole in the buffer is handed out where it is, one that crosses a refill is copied.
  const size_t first = pos_ - 1;
  bool copied = false;
  int depth = 1;
  bool in_string = false;
  bool escaped = false;
  while (depth > 0) {
    if (pos_ == len_) {
      if (!copied) record_.assign(buffer_.data() + first, len_ - first);
      copied = true;
      if (!Refill()) {
        done_ = true;
        truncated_ = true;
        return false;
      }
    }
    const unsigned char* data = reinterpret_cast<const unsigned char*>(buffer_.data());
    const size_t start = pos_;
    size_t i = pos_;
    while (i < len_ && depth > 0) {
      if (escaped) {
        escaped = false;
        ++i;
      } else if (in_string) {
        while (i < len_ && !kStringStop[data[i]]) ++i;
        if (i == len_) break;
        if (data[i++] == '\\') {
          escaped = true;
        } else {
          in_string = false;
        }
      } else {
        while (i < len_ && !kStructureStop[data[i]]) ++i;
        if (i == len_) break;
        const unsigned char b = data[i++];
        if (b == '"') {
          in_string = true;
        } else if (b == '{') {
          ++depth;
        } else {
          --depth;
        }
      }
    }
    if (copied) record_.append(buffer_.data() + start, i - start);
    offset_ += i - start;
    pos_ = i;
  }
  ++records_;
  view =
      copied ? std::string_view(record_) : std::string_view(buffer_.data() + first, pos_ - first);
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
