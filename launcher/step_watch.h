// StepWatch: an attempt's training progress as the launcher sees it, from the metrics lines with a
// "step" that rank 0 appends to <job>/metrics/rank-0.jsonl after the attempt started
// (dtrain-clip's metrics, or any program writing such lines to $DTRAIN_LOG_DIR/metrics): when the
// first step was completed, the first step number (the step it resumed from, plus one) and the
// last. From these come the attempts record's time to recover and steps lost. Only where that
// file is visible from the launcher (local jobs, shared storage); otherwise they stay unknown.
// Driven by the supervisor's loop; a stat every half second.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dtrain {

class StepWatch {
 public:
  explicit StepWatch(std::string metrics_path);

  void Tick();
  // Reads what is left at once (the attempt ended).
  void Finish();

  // Wall-clock microseconds of the first step; 0 while unknown.
  int64_t first_step_us() const { return first_step_us_; }
  // Step numbers of this attempt's first and last metrics lines; -1 while unknown.
  int64_t first_step() const { return first_step_; }
  int64_t last_step() const { return last_step_; }

 private:
  void Read();

  std::string path_;
  uint64_t offset_ = 0;  // where this attempt's lines start
  std::string partial_;  // a line not yet complete
  int64_t first_step_us_ = 0;
  int64_t first_step_ = -1;
  int64_t last_step_ = -1;
  std::chrono::steady_clock::time_point next_;
};

// What one metrics line says of progress: StepWatch reads it live, attempt_steps.h from the file
// fetched after the job.
struct MetricsStep {
  int64_t step = -1;     // its integer "step" (>= 0); -1: none, or not a JSON object
  int64_t time_us = -1;  // "time_us", else "time" (seconds), on the writer's clock; -1: none
};
MetricsStep ReadMetricsStep(const std::string& line);

}  // namespace dtrain
