// FirstStepWatch: when an attempt completed its first step, seen from the launcher as the first
// metrics line with a "step" that rank 0 appends to <job>/metrics/rank-0.jsonl after the attempt
// started (dtrain-clip's metrics, or any program writing such lines to $DTRAIN_LOG_DIR/metrics).
// Only where that file is visible from the launcher (local jobs, shared storage); otherwise the
// time stays unknown. Driven by the supervisor's loop; a stat every half second.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dtrain {

class FirstStepWatch {
 public:
  explicit FirstStepWatch(std::string metrics_path);

  void Tick();
  // Wall-clock microseconds of the first step; 0 while unknown.
  int64_t first_step_us() const { return first_step_us_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;  // where this attempt's lines start
  std::string partial_;  // a line not yet complete
  int64_t first_step_us_ = 0;
  std::chrono::steady_clock::time_point next_;
};

}  // namespace dtrain
