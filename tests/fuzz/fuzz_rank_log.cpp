// `dtrain logs` over a rank log and its arrival index (rank-R.idx): the input is split at its
// first NUL byte into the log of rank 0 and its index; rank 1 gets the same bytes the other way
// round. Every form (one rank, interleaved, --tail) must read any bytes.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "launcher/error.h"
#include "launcher/log_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string log_dir = dtrain::fuzz::ScratchDir() + "/logs";
  ::mkdir(log_dir.c_str(), 0700);
  ::mkdir((log_dir + "/job").c_str(), 0700);
  const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t cut = nul ? static_cast<size_t>(nul - data) : size;
  const size_t rest = nul ? cut + 1 : size;
  dtrain::fuzz::WriteInput("logs/job/rank-0.log", data, cut);
  dtrain::fuzz::WriteInput("logs/job/rank-0.idx", data + rest, size - rest);
  dtrain::fuzz::WriteInput("logs/job/rank-1.log", data + rest, size - rest);
  dtrain::fuzz::WriteInput("logs/job/rank-1.idx", data, cut);
  std::FILE* sink = std::fopen("/dev/null", "w");
  for (int tail : {-1, 0, 3}) {
    for (bool one : {true, false}) {
      dtrain::LogsOptions options;
      options.log_dir = log_dir;
      options.job = "job";
      options.tail = tail;
      if (one) options.ranks = {1};
      try {
        dtrain::ShowLogs(options, sink);
      } catch (const dtrain::Error&) {
      }
    }
  }
  std::fclose(sink);
  dtrain::LastLines(log_dir + "/job/rank-0.log", 2);
  return 0;
}
