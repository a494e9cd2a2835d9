// All-gather that keeps autograd (OpenCLIP's torch.distributed.nn.all_gather): forward stacks
// every rank's rows in rank order; backward hands each rank the SUM over ranks of the gradients
// computed for its rows (allreduce, then this rank's slice — a reduce-scatter).
#pragma once

#include <torch/torch.h>

#include "runtime/dist/communicator.h"

namespace dtrain::clip {

// Collective: every rank calls it with the same shape, and later runs backward through it.
// The communicator must outlive the backward pass.
torch::Tensor AllGatherWithGrad(const torch::Tensor& local, Communicator& comm);

// The plain gather: other ranks' rows are constants, this rank's rows stay differentiable
// (OpenCLIP's gather without --gather-with-grad). Its gradients miss every other rank's loss
// terms for this rank's rows, so they are NOT those of one process on the whole batch.
torch::Tensor AllGatherNoGrad(const torch::Tensor& local, Communicator& comm);

}  // namespace dtrain::clip
