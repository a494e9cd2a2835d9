// MetricsLog: dtrain-clip's metrics as JSON lines (one object per line, flushed as written) in
// <log dir>/metrics/rank-R.jsonl, where `dtrain logs` and the checks find them.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "runtime/formats/json_object.h"

namespace dtrain::clip {

// One metrics line: a JSON object (runtime/formats/json_object.h).
using MetricsLine = JsonObject;

class MetricsLog {
 public:
  MetricsLog() = default;
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Creates parent directories and opens `path` for appending (a resumed run continues the
  // file). Throws std::runtime_error naming the path.
  void Open(const std::string& path);
  void Write(const MetricsLine& line);
  const std::string& path() const { return path_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
};

// Where rank R's metrics go: `explicit_path` if set, else $DTRAIN_LOG_DIR/metrics/rank-R.jsonl,
// else <logs>/metrics/rank-R.jsonl.
std::string MetricsPathFor(const std::string& explicit_path, const std::string& logs, int rank);

// Creates `dir` and its parents; throws std::runtime_error naming the directory.
void MakeDirectories(const std::string& dir);

}  // namespace dtrain::clip
