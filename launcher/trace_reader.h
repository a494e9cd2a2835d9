// Reads a Chrome trace-event JSON array ("[ {...}, {...} ]") one record at a time, so a trace of
// any size needs only the memory of its largest record. A file cut short (a killed writer) ends
// the records early and is reported by truncated(); a missing closing ']' is not (Horovod's older
// writers never close the array).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dtrain {

class TraceReader {
 public:
  // Throws dtrain::Error when the file cannot be opened or does not start a JSON array.
  explicit TraceReader(const std::string& path);
  ~TraceReader();
  TraceReader(const TraceReader&) = delete;
  TraceReader& operator=(const TraceReader&) = delete;

  // The text of the next complete record; false at the end of the array or of the file.
  // Throws dtrain::Error (path and byte offset) on text that is not a trace record.
  bool NextText(std::string& text);
  // The next record, parsed.
  bool Next(nlohmann::json& record);

  const std::string& path() const { return path_; }
  // True when the file ends inside a record; truncation_note() then says where.
  bool truncated() const { return truncated_; }
  std::string truncation_note() const;
  uint64_t records() const { return records_; }

 private:
  int Get();  // the next byte, or EOF
  [[noreturn]] void Fail(const std::string& what) const;

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<char> buffer_;
  size_t pos_ = 0;
  size_t len_ = 0;
  uint64_t offset_ = 0;  // bytes consumed
  uint64_t record_start_ = 0;
  uint64_t records_ = 0;
  bool done_ = false;
  bool truncated_ = false;
};

}  // namespace dtrain
