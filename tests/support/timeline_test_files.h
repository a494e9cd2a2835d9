// Helpers for the timeline tests: scratch folders, whole-file reads, and rank traces written by
// the real writer in a separate process (as each rank of a job is).
#pragma once

#include "tests/support/files.h"  // ReadFile, WriteFile

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "runtime/trace/timeline.h"

namespace dtrain::testing {

// A fresh folder under the system temp dir, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    char name[] = "/tmp/dtrain-timeline-test-XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `body` in a child process and waits for it; returns its exit status (-1 if signalled).
inline int RunInChild(const std::function<void()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// What one rank of a data-parallel step records: compute spans, and a fusion buffer's
// allreduce overlapping the backward pass.
inline void RecordStep(clip::Timeline& t, int64_t bytes) {
  using std::chrono::microseconds;
  t.Begin("compute", "DATA");
  std::this_thread::sleep_for(microseconds(200));
  t.End("compute", "DATA");
  t.Begin("compute", "FORWARD");
  std::this_thread::sleep_for(microseconds(500));
  t.End("compute", "FORWARD");
  t.Begin("compute", "BACKWARD");
  t.Begin("fusion.0", "ALLREDUCE",
          "\"bytes\": " + std::to_string(bytes) + ", \"tensors\": 3, \"dtype\": \"float32\"");
  t.Begin("fusion.0", "QUEUE");
  std::this_thread::sleep_for(microseconds(200));
  t.End("fusion.0", "QUEUE");
  t.Begin("fusion.0", "GLOO_ALLREDUCE");
  std::this_thread::sleep_for(microseconds(300));
  t.End("compute", "BACKWARD");
  std::this_thread::sleep_for(microseconds(300));
  t.End("fusion.0", "GLOO_ALLREDUCE");
  t.End("fusion.0", "ALLREDUCE");
  t.Begin("compute", "OPTIMIZER");
  std::this_thread::sleep_for(microseconds(100));
  t.End("compute", "OPTIMIZER");
}

// A complete rank trace written by a separate process.
inline void WriteRankTrace(const std::string& path, int rank, const std::string& host,
                           int64_t clock_offset_us, int steps) {
  RunInChild([&] {
    clip::Timeline t;
    t.Open(path, rank, host, true);
    t.SetClockOffset(clock_offset_us, 35);
    for (int i = 0; i < steps; ++i) {
      t.Instant("", "CYCLE_START");
      RecordStep(t, 1 << 20);
    }
    t.Close();
  });
}

}  // namespace dtrain::testing
