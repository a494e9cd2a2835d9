#include "runtime/train/progress_display.h"

#include <unistd.h>

namespace dtrain::clip {

ProgressDisplay::ProgressDisplay(std::FILE* out, int every)
    : out_(out), tty_(isatty(fileno(out)) != 0), every_(every < 1 ? 1 : every) {}

void ProgressDisplay::Step(int epoch, int epochs, int64_t step, int64_t total_steps, double loss,
                           double samples_per_s, double seconds_left) {
  const long eta = static_cast<long>(seconds_left + 0.5);
  if (tty_) {
    std::fprintf(out_,
                 "\r\033[Kepoch %d/%d  step %lld/%lld  loss %.4f  %.1f samples/s  ETA %ld:%02ld",
                 epoch, epochs, static_cast<long long>(step), static_cast<long long>(total_steps),
                 loss, samples_per_s, eta / 60, eta % 60);
    live_ = true;
  } else if (step % every_ == 0 || step == total_steps) {
    std::fprintf(out_, "epoch %d/%d step %lld/%lld loss %.4f samples/s %.1f eta_s %ld\n", epoch,
                 epochs, static_cast<long long>(step), static_cast<long long>(total_steps), loss,
                 samples_per_s, eta);
  }
  std::fflush(out_);
}

void ProgressDisplay::Break() {
  if (live_) std::fputc('\n', out_);
  live_ = false;
  std::fflush(out_);
}

}  // namespace dtrain::clip
