// SampleLog: which sample ids each rank trained on, for tests of resumption (--log-sample-ids).
// Every rank appends "STEP ID ID ..." lines, one per batch, to the same file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dtrain::clip {

// Off when opened with an empty path. Each line goes out in one O_APPEND write, so the lines of
// ranks sharing the file do not interleave.
class SampleLog {
 public:
  SampleLog() = default;
  SampleLog(const SampleLog&) = delete;
  SampleLog& operator=(const SampleLog&) = delete;
  ~SampleLog();

  // Throws std::runtime_error naming the path when it cannot be opened.
  void Open(const std::string& path);
  // `step`: the optimizer step (1-based, counted over the whole job) the batch was trained in.
  void Write(int64_t step, const std::vector<int64_t>& ids);

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace dtrain::clip
