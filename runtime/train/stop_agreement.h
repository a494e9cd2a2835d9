// StopAgreement: every rank of a job stops after the same step when any of them was asked to stop
// (stop_signals.h). A launcher signals the ranks one by one, a node's ranks may be signalled
// alone (the health watch takes a node out, a straggler leaves), and a rank that stopped alone
// would leave the others waiting in the next step's collectives, with no checkpoint written.
//
// After each step every rank starts adding what it was asked (a count per signal) into one small
// sum over the ranks, and reads the sum started a step or two before: on the CPU the sum of the
// step before (it ran beside this step), under NCCL the sum of two steps before, copied from the
// GPU behind those steps without making the host wait (StepScalars). Every rank reads the same
// sum after the same step, so all stop there: one or two steps after the first rank saw its
// signal, or three under NCCL. With one rank there is nothing to agree on, and a request stops
// it after the step it came in.
#pragma once

#include <torch/torch.h>

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
  // Time spent in AfterStep and Drain so far, for the end metrics: what the agreement costs the
  // step's thread.
  double seconds() const { return seconds_; }

 private:
  struct Exchange {
    torch::Tensor counts;                 // summed in place
    std::unique_ptr<PendingSum> pending;  // on the CPU: waited for when read
    std::unique_ptr<StepScalars> copy;    // under NCCL: the sums' copy to the host
  };
  int Read();  // the oldest exchange in flight

  TrainCollectives& coll_;
  bool on_gpu_;
  int lag_;  // steps between a sum's start and its reading: 1 on the CPU, 2 under NCCL
  double seconds_ = 0;
  std::deque<Exchange> in_flight_;
  std::deque<std::unique_ptr<StepScalars>> copies_;  // read, reused for later sums
};

}  // namespace dtrain::clip
