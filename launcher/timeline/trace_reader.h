// Reads a Chrome trace-event file one record at a time, so a trace of any size needs only the
// memory of its largest record. Both of Chrome's forms: a JSON array ("[ {...}, {...} ]",
// dtrain-clip and Horovod) and a JSON object whose "traceEvents" member holds the array (PyTorch's
// Kineto traces); the object's other members are its header(). Plain or gzip-compressed (.json.gz).
// A file cut short (a killed writer) ends the records early and is reported by truncated(); a
// missing closing ']' is not (Horovod's older writers never close the array).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain {

class TraceReader {
 public:
  // Throws dtrain::Error when the file cannot be opened or does not start a trace; for the object
  // form, reads the members before "traceEvents" (header()).
  explicit TraceReader(const std::string& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // The text of the next complete record; false at the end of the array or of the file.
  // Throws dtrain::Error (path and byte offset) on text that is not a trace record.
  bool NextText(std::string& text);
  // The same without a copy: `view` stays valid until the next call.
  bool NextView(std::string_view& view);
  // The next record, parsed.
  bool Next(nlohmann::json& record);

  const std::string& path() const { return path_; }
  // True for the object form; header() then holds its members other than "traceEvents" (those
  // after the array only once the records have been read to the end).
  bool object_form() const { return object_form_; }
  const nlohmann::json& header() const { return header_; }
  // True when the file ends inside a record; truncation_note() then says where.
  bool truncated() const { return truncated_; }
  std::string truncation_note() const;
  uint64_t records() const { return records_; }

 private:
  int Get();  // the next byte, or EOF
  int SkipSpace();
  bool Refill();
  [[noreturn]] void Fail(const std::string& what) const;
  // Object form: reads members into header_ up to "traceEvents" (true) or the closing brace.
  bool ReadMembersUntilEvents();
  // The text of one JSON value whose first byte `first` was just read.
  std::string ValueText(int first);

  std::string path_;
  void* file_ = nullptr;  // zlib's gzFile: reads gzip and plain files alike
  std::vector<char> buffer_;
  std::string record_;  // a record that crossed a refill
  size_t pos_ = 0;
  size_t len_ = 0;
  uint64_t offset_ = 0;  // bytes consumed
  uint64_t record_start_ = 0;
  uint64_t records_ = 0;
  bool done_ = false;
  bool truncated_ = false;
  bool object_form_ = false;
  nlohmann::json header_ = nlohmann::json::object();
};

}  // namespace dtrain
