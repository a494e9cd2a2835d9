#include "runtime/train/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace dtrain::clip {
namespace {

constexpr int kSignals[3] = {SIGTERM, SIGINT, SIGUSR1};
constexpr int64_t kWindowFloorNs = 500'000'000;  // half a second

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StopSignals* installed = nullptr;

}  // namespace

StopSignals& StopSignals::Install() {
  if (installed) return *installed;
  installed = new StopSignals();  // never destroyed: its thread runs until the process ends
  sigset_t set;
  sigemptyset(&set);
  for (int i = 0; i < 3; ++i) {
    struct sigaction now {};
    sigaction(kSignals[i], nullptr, &now);
    if (now.sa_handler == SIG_IGN) continue;
    installed->caught_[i] = kSignals[i];
    sigaddset(&set, kSignals[i]);
  }
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([] { installed->Wait(); }).detach();
  return *installed;
}

StopSignals* StopSignals::Installed() {
  return installed;
}

void StopSignals::Arm() {
  int idle = kIdle;
  if (state_.compare_exchange_strong(idle, kArmed)) progress_ns_.store(NowNs());
}

void StopSignals::Disarm() {
  int armed = kArmed;
  state_.compare_exchange_strong(armed, kIdle);
}

void StopSignals::StepDone(double seconds) {
  step_ns_.store(static_cast<int64_t>(seconds * 1e9));
  progress_ns_.store(NowNs());
}

StopSignals::Busy::Busy(StopSignals* signals) : signals_(signals) {
  if (signals_) signals_->busy_.fetch_add(1);
}

StopSignals::Busy::~Busy() {
  if (!signals_) return;
  signals_->progress_ns_.store(NowNs());
  signals_->busy_.fetch_sub(1);
}

void StopSignals::Stopping(int signal) {
  agreed_.store(signal);
  state_.store(kStopping);
}

int StopSignals::end_signal() const {
  const int agreed = agreed_.load();
  return agreed != 0 ? agreed : requested_.load();
}

void StopSignals::EndBy(int signal) {
  std::fflush(stdout);
  std::fflush(stderr);
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(signal, &fallback, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signal);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  raise(signal);  // to this thread, which no longer blocks it: the default action, for the process
  _exit(128 + signal);
}

const char* StopSignals::Name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "signal";
  }
}

void StopSignals::Wait() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : caught_) {
    if (signal != 0) sigaddset(&set, signal);
  }
  // Ticks of 50 ms: how late at most the window's end is noticed.
  const timespec tick{0, 50'000'000};
  for (;;) {
    const int signal = sigtimedwait(&set, nullptr, &tick);
    const int state = state_.load();
    if (signal > 0) {
      if (state == kIdle) EndBy(signal);
      if (state == kStopping) {
        if (signal == SIGINT) EndBy(SIGINT);
        continue;  // SIGTERM, SIGUSR1 again: the checkpoint is being written
      }
      int none = 0;
      if (requested_.compare_exchange_strong(none, signal)) {
        progress_ns_.store(NowNs());
        std::fprintf(stderr,
                     "dtrain-clip: %s: stopping at the next step every rank reaches, with a "
                     "checkpoint%s\n",
                     Name(signal), signal == SIGINT ? " (Ctrl-C again: at once)" : "");
        std::fflush(stderr);
      } else if (signal == SIGINT) {
        EndBy(SIGINT);
      }
      continue;
    }
    const int pending = requested_.load();
    if (state != kArmed || pending == 0 || busy_.load() > 0) continue;
    const int64_t window = kWindowFloorNs + 2 * step_ns_.load();
    const int64_t waited = NowNs() - progress_ns_.load();
    if (waited > window) {
      std::fprintf(stderr,
                   "dtrain-clip: %s: no step ended within %.1f s of it (a collective waits for a "
                   "rank that is gone?): ending without a checkpoint\n",
                   Name(pending), static_cast<double>(waited) / 1e9);
      EndBy(pending);
    }
  }
}

}  // namespace dtrain::clip
