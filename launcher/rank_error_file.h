// RankError: what torch's `@record` (torch/distributed/elastic/multiprocessing/errors) wrote to a
// rank's TORCHELASTIC_ERROR_FILE when an exception left its main function:
// {"message": {"message": "Type: text", "extraInfo": {"py_callstack": "...", "timestamp": "S"}}}.
// Read back by dtrain launch so a failure report leads with the exception, not with whatever
// the rank printed on its way out (torchrun's "Root Cause").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dtrain {

struct RankError {
  int rank = -1;
  std::string path;       // the error file
  std::string message;    // "ValueError: bad shape"
  std::string where;      // innermost "FILE:LINE" of the traceback; "" when none
  int64_t time_s = 0;     // when it was written (seconds since the epoch); 0 unknown
  std::string callstack;  // the whole traceback as Python formatted it
};

// The error file at `path`; nullopt when there is none or it is not what @record writes.
std::optional<RankError> ReadRankErrorFile(const std::string& path, int rank);

// The root cause among the error files of `ranks` ((rank, path) pairs): the one written first,
// as torchrun chooses; ties go to `failed_rank`. nullopt when no rank wrote one.
std::optional<RankError> FirstRankError(const std::vector<std::pair<int, std::string>>& ranks,
                                        int failed_rank);

// One line for job.json: "rank 1 on node b: ValueError: bad shape (train.py:12)".
std::string RankErrorLine(const RankError& error, const std::string& host);

// The report's lead: "dtrain: root cause: rank 1 on node b at 2024-05-01 12:00:03 UTC:
// ValueError: bad shape" and, where known, "dtrain:   at /src/train.py:12 (traceback in FILE)".
std::string DescribeRankError(const RankError& error, const std::string& host);

// "/path/train.py:12" out of a Python traceback: its last `File "...", line N`.
std::string InnermostFrame(const std::string& callstack);

}  // namespace dtrain
