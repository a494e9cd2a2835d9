// ProgressDisplay: training progress for people. On a terminal one line redrawn in place (step,
// loss, samples/s, ETA); otherwise a plain line every N steps, so logs stay readable.
#pragma once

#include <cstdint>
#include <cstdio>

namespace dtrain::clip {

class ProgressDisplay {
 public:
  // `out` is usually stdout; `every` is the plain-line interval.
  ProgressDisplay(std::FILE* out, int every);
  void Step(int epoch, int epochs, int64_t step, int64_t total_steps, double loss,
            double samples_per_s, double seconds_left);
  // Ends the live line (before other output).
  void Break();

 private:
  std::FILE* out_;
  bool tty_;
  int every_;
  bool live_ = false;
};

}  // namespace dtrain::clip
