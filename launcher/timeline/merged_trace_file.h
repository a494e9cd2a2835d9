// The merged trace being written: a JSON array, one record a line, under a temporary name renamed
// to the real one when whole (Commit), so no reader ever sees half a merge.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace dtrain {

class MergedTraceFile {
 public:
  // Throws dtrain::Error when the temporary file cannot be created.
  explicit MergedTraceFile(const std::string& path);
  ~MergedTraceFile();
  MergedTraceFile(const MergedTraceFile&) = delete;
  MergedTraceFile& operator=(const MergedTraceFile&) = delete;

  // Bytes that are not UTF-8 (a trace written by another tool) become U+FFFD, not an exception.
  void Write(const nlohmann::json& record) {
    WriteText(record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  // `text` must be one JSON object.
  void WriteText(std::string_view text);
  // Closes the array and renames the file into place; throws dtrain::Error on a write error.
  void Commit();

 private:
  std::string path_;
  std::string temp_;
  std::FILE* file_ = nullptr;
  bool first_ = true;
};

}  // namespace dtrain
