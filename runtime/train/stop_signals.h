// StopSignals: how `dtrain-clip train` ends on SIGTERM, SIGINT or SIGUSR1 (a launcher stopping
// the job or a node, Ctrl-C, Slurm's --signal=USR1@S before a preemption or the time limit).
//
// Install() blocks the three signals in the calling thread, and so in every thread started after
// it, and starts a thread that waits for them. Until Arm(), a signal ends the process at once by
// that signal, as if nothing caught it. Armed (the training loop, from its first step on), a
// signal is only noted: the loop reads requested() after each step, the ranks agree on a step
// (stop_agreement.h), a checkpoint of that step is written, and EndBy() ends the process by the
// signal after its last metrics line.
//
// Should no step end within a window after the signal (half a second and twice the last step's
// time, counted again from each step that ends), the process is waiting on something that does
// not come, most often a collective with a rank that is gone: the thread ends the process by the
// signal, without a checkpoint, so a launcher that stops the job after a lost node waits no
// longer than that window. While the checkpoint is written (Stopping()), SIGINT again ends the
// process at once; SIGTERM and SIGUSR1 again are ignored (a launcher's SIGKILL at the end of its
// grace period bounds the write). A signal the process inherited as ignored (SIG_IGN: nohup, a
// background job of a shell without job control) stays ignored.
#pragma once

#include <atomic>
#include <cstdint>

namespace dtrain::clip {

class StopSignals {
 public:
  // Once, before any other thread is started; the process's StopSignals from then on.
  static StopSignals& Install();
  // The installed one, or null (commands other than train, and programs that never install it).
  static StopSignals* Installed();

  // From the end of the first step to the end of the training loop.
  void Arm();
  void Disarm();
  // After each step while armed: a step ended, `seconds` long (the window moves on).
  void StepDone(double seconds);
  // The signal received while armed (SIGTERM, SIGINT or SIGUSR1), 0 for none.
  int requested() const { return requested_.load(); }
  // While one lives, the window does not run out: work of a known end between steps (a
  // checkpoint's write, an evaluation), after which the window starts again. Null: nothing.
  class Busy {
   public:
    explicit Busy(StopSignals* signals);
    ~Busy();
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    StopSignals* signals_;
  };
  // The ranks agreed to stop on `signal`: no window from now on, and EndBy(signal) at the end.
  void Stopping(int signal);
  // The signal the process must end by after its last line: the agreed one, else one received
  // while armed and never agreed on (the loop had ended), else 0.
  int end_signal() const;

  // Flushes stdout and stderr and ends the process by `signal` (its default action).
  [[noreturn]] static void EndBy(int signal);
  // "SIGTERM", "SIGINT", "SIGUSR1", else "signal N".
  static const char* Name(int signal);

 private:
  StopSignals() = default;
  void Wait();  // the waiting thread

  enum State { kIdle, kArmed, kStopping };
  std::atomic<int> state_{kIdle};
  std::atomic<int> requested_{0};
  std::atomic<int> agreed_{0};
  std::atomic<int64_t> progress_ns_{0};  // the signal's arrival or the last step's end since
  std::atomic<int64_t> step_ns_{0};      // the last step's length
  std::atomic<int> busy_{0};             // Busy scopes alive
  int caught_[3] = {0, 0, 0};  // the signals blocked and waited for (0: inherited SIG_IGN)
};

}  // namespace dtrain::clip
