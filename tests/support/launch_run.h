// A `dtrain launch` run to its end by the tests of nodes that turn unfit: its exit status, what it
// printed on stderr, its job's record, and how long after a fault it named a node.
#pragma once

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/dtrain_process.h"
#include "tests/support/files.h"

namespace dtrain::test {

struct LaunchRun {
  double detected_s = -1;  // the fault -> the words looked for on dtrain's stderr; -1: not said
  int status = -1;
  std::string err;
  nlohmann::json record;
};

// `dtrain args...` run in `dir` until it ends (within `wait_s`): its exit status, what it printed
// on stderr and job `job`'s record.
inline LaunchRun RunToTheEnd(const std::vector<std::string>& args, const std::string& dir,
                             const std::string& job, int wait_s) {
  LaunchRun r;
  testing::DtrainProcess dtrain(args, dir);
  r.status = dtrain.Wait(wait_s);
  r.err = dtrain.err();
  r.record =
      nlohmann::json::parse(testing::ReadFile(dir + "/" + job + "/job.json"), nullptr, false);
  std::printf("%s", r.err.c_str());
  return r;
}

// Seconds from now until `dtrain` says `text` on its stderr, looked for while it runs and for at
// most `limit_s`; -1 when it did not.
inline double SecondsUntilSaid(testing::DtrainProcess& dtrain, const std::string& text,
                               double limit_s) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto limit = std::chrono::duration<double>(limit_s);
  while (Clock::now() - start < limit && dtrain.running()) {
    if (dtrain.err().find(text) != std::string::npos)
      return std::chrono::duration<double>(Clock::now() - start).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

}  // namespace dtrain::test
