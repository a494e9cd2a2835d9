// Communicator: the collectives dtrain-clip needs, over one group of ranks (the world or a process
// set). Calls are blocking and must be made in the same order on every member; a communicator is
// used by one thread at a time (the gradient synchroniser gets its own).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

namespace dtrain::clip {

// A collective in flight; Wait() returns when its result is in the tensor (or throws).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void Wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual const std::string& backend() const = 0;  // "gloo" or "nccl"
  virtual int rank() const = 0;                    // within this group
  virtual int size() const = 0;
  // Horovod's activity name for the timeline: GLOO_ALLREDUCE or NCCL_ALLREDUCE.
  virtual const char* allreduce_activity() const = 0;

  virtual void AllreduceSum(torch::Tensor& tensor) = 0;  // in place
  // Starts the allreduce and returns; the tensor must stay untouched until Wait().
  virtual std::unique_ptr<PendingCollective> AllreduceSumAsync(torch::Tensor& tensor);
  // The same, not reported to the heartbeat: a small exchange that stays in flight while other
  // collectives start and end (the stop agreement's), which a hang report must not take for the
  // collective a rank waits in.
  virtual std::unique_ptr<PendingCollective> AllreduceSumInBackground(torch::Tensor& tensor) {
    return AllreduceSumAsync(tensor);
  }
  virtual void ReduceSum(torch::Tensor& tensor, int root) = 0;  // result valid on root only
  virtual void Broadcast(torch::Tensor& tensor, int root) = 0;
  // Concatenates every member's `tensor` (same shape on all) along dim 0, in rank order.
  virtual torch::Tensor Allgather(const torch::Tensor& tensor) = 0;
  virtual void Barrier() = 0;
};

// How to build a group's communicator: the backend and what the Gloo device binds to.
struct CommunicatorOptions {
  std::string backend = "gloo";  // gloo | nccl
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  std::string gloo_interface;  // GLOO_SOCKET_IFNAME
  std::string gloo_bind_host;  // address to bind when no interface is named
  // What the heartbeat calls this group's collectives ("world", "gradients", a process set's
  // name) and its members' global ranks (empty: the world, group rank = global rank). Groups
  // used from different threads need different names: each numbers its collectives.
  std::string set_name = "world";
  std::vector<int> members;
};

// Ranks `rank` of `size` meet through `store` (a PrefixStore per group). Throws std::runtime_error
// for an unknown or unavailable backend.
std::unique_ptr<Communicator> MakeCommunicator(const CommunicatorOptions& options,
                                               const c10::intrusive_ptr<c10d::Store>& store,
                                               int rank, int size);

// "nccl" when LibTorch has CUDA and a GPU is visible, else "gloo".
std::string DefaultBackend();

}  // namespace dtrain::clip
