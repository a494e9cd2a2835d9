// The controller of gradient averaging, as Horovod's: the small collectives by which the ranks
// agree on what to reduce. Once, which gradients lie end to end in one buffer on every rank
// (chains, reduced in place as one view); then, every cycle, which gradients are ready on every
// rank and whether all ranks want to stop (Horovod's bit-vector negotiation).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <vector>

#include "runtime/dist/communicator.h"

namespace dtrain::clip {

class SyncController {
 public:
  // The agreement collectives run on `control_device` (the gradients' device: NCCL takes GPU
  // tensors only); `comm` must outlive this object.
  SyncController(Communicator& comm, torch::Device control_device)
      : comm_(comm), control_device_(control_device) {}

  // Chains of parameters (indices into `params`) whose .grad lie end to end in one storage, in
  // memory order, with the same dtype, on every rank; at least two links each. Collective.
  std::vector<std::vector<size_t>> AgreeOnChains(const std::vector<torch::Tensor>& params);

  // The indices ready on every rank, sorted; `stop` is true when every rank asked to stop.
  // Collective: one allreduce of ready_here.size() + 1 integers.
  std::vector<size_t> AgreeOnReady(const std::vector<bool>& ready_here, bool stop_here, bool& stop);

 private:
  // Sums `values` over the ranks; `values` stays where it is and receives the sum.
  void AllreduceControl(torch::Tensor& values);

  Communicator& comm_;
  torch::Device control_device_;
};

}  // namespace dtrain::clip
