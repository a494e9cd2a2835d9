// job.json as `dtrain logs`, `dtrain status` and `dtrain timeline` read it back: a JobSummary or
// a dtrain::Error naming the file.
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "launcher/error.h"
#include "launcher/job_record.h"
#include "launcher/log_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string log_dir = dtrain::fuzz::ScratchDir() + "/jobs";
  ::mkdir(log_dir.c_str(), 0700);
  ::mkdir((log_dir + "/job").c_str(), 0700);
  dtrain::fuzz::WriteInput("jobs/job/job.json", data, size);
  try {
    dtrain::ReadJobSummary(log_dir + "/job");
  } catch (const dtrain::Error&) {
  }
  std::FILE* sink = std::fopen("/dev/null", "w");
  dtrain::ListJobs(log_dir, sink);
  std::fclose(sink);
  return 0;
}
