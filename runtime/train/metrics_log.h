// MetricsLog: dtrain-clip's metrics as JSON lines (one object per line, written whole as it comes)
// in <log dir>/metrics/rank-R.jsonl, where `dtrain logs` and the checks find them. A line the
// disk refuses (full, failing) is lost and training goes on: said on stderr when it starts and
// when the disk takes lines again, with how many were lost; a line the disk took only part of
// stays a line of its own that readers skip.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/formats/json_object.h"
#include "runtime/formats/line_appender.h"

namespace dtrain::clip {

// One metrics line: a JSON object (runtime/formats/json_object.h).
using MetricsLine = JsonObject;

class MetricsLog {
 public:
  MetricsLog() = default;
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Creates parent directories and opens `path` for appending (a resumed run continues the
  // file). Throws std::runtime_error naming the path.
  void Open(const std::string& path);
  void Write(const MetricsLine& line);
  const std::string& path() const { return path_; }
  uint64_t lost_lines() const { return out_.lost_lines(); }  // refused by the disk, in all

 private:
  LineAppender out_;
  std::string path_;
};

// Where rank R's metrics go: `explicit_path` if set, else $DTRAIN_LOG_DIR/metrics/rank-R.jsonl,
// else <logs>/metrics/rank-R.jsonl.
std::string MetricsPathFor(const std::string& explicit_path, const std::string& logs, int rank);

// Creates `dir` and its parents; throws std::runtime_error naming the directory.
void MakeDirectories(const std::string& dir);

}  // namespace dtrain::clip
