// StopAgreement: every rank of a job stops after the same step when any of them was asked to stop
// (stop_signals.h). A launcher signals the ranks one by one, a node's ranks may be signalled
// alone (the health watch takes a node out, a straggler leaves), and a rank that stopped alone
// would leave the others waiting in the next step's collectives, with no checkpoint written.
//
// After each step every rank adds what it was asked (a count per signal) into one small sum over
// the ranks. On the CPU the sum is read at once, so the ranks stop after the step in which the
// first of them saw its signal, or the next. Under NCCL the sum stays on the GPU, queued behind
// the step, and is read two steps later without making the host wait (StepScalars): the ranks
// stop two steps later than that. Either way every rank reads the same sum after the same step.
// With one rank there is nothing to agree on and a request stops it after the step it came in.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <deque>
#include <memory>

#include "runtime/dist/train_collectives.h"
#include "runtime/train/step_scalars.h"

namespace dtrain::clip {

class StopAgreement {
 public:
  explicit StopAgreement(TrainCollectives& collectives);
  ~StopAgreement();

  // Collective, after each step: `requested` is this rank's signal (0 for none). Returns the
  // signal the ranks agreed to stop on after this step, 0 to go on.
  int AfterStep(int requested);
  // Collective at an epoch's end: reads the sums still in flight; the signal any asked to stop on.
  int Drain();
  // Steps between a sum's start and its reading (0 on the CPU, 2 under NCCL).
  int lag() const { return lag_; }
  // Time spent in AfterStep and Drain so far, for the end metrics: what the agreement costs the
  // step's thread.
  double seconds() const { return seconds_; }

 private:
  int Read();  // the oldest sum in flight

  TrainCollectives& coll_;
  int lag_;
  double seconds_ = 0;
  std::deque<std::unique_ptr<StepScalars>> in_flight_;
  std::deque<std::unique_ptr<StepScalars>> free_;  // taken, reused for later sums
};

}  // namespace dtrain::clip
