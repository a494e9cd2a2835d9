// GradientSync: Horovod-style data-parallel gradient averaging. A hook on every parameter queues
// its gradient the moment backward produces it; a background loop agrees with the other ranks,
// once per cycle, on which gradients are ready everywhere, copies them into a fusion buffer and
// allreduces them in buckets while backward goes on. Synchronize() waits and writes the averages.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/communicator.h"

namespace dtrain::clip {

struct GradientSyncOptions {
  int64_t fusion_threshold_bytes = 64 << 20;  // bucket size; 0 = one allreduce per tensor
  double cycle_time_ms = 1.0;                 // how often ranks agree on what is ready
  bool broadcast_parameters = true;           // copy rank 0's parameters to all at start
};

// Defaults from Horovod's variables: HOROVOD_FUSION_THRESHOLD (bytes), HOROVOD_CYCLE_TIME (ms).
GradientSyncOptions GradientSyncOptionsFromEnvironment();

class GradientSync {
 public:
  // Collective. `comm` is used only by this object (its own thread), never shared with the
  // caller's collectives. Parameters must keep their storage while this object lives.
  GradientSync(std::vector<std::pair<std::string, torch::Tensor>> named_parameters,
               std::unique_ptr<Communicator> comm, GradientSyncOptions options);
  // Collective: the loop ends when every rank has asked it to.
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // false for the micro-batches before the last one of an --accum-freq step: gradients only
  // accumulate locally, nothing is sent.
  void SetSyncEnabled(bool enabled) { sync_enabled_ = enabled; }
  bool sync_enabled() const { return sync_enabled_; }
  // Queues the gradient of parameter `index` (construction order) computed outside autograd,
  // as the hook does for backward's; the caller keeps `grad` unchanged until Synchronize().
  void Submit(size_t index, const torch::Tensor& grad) { Queue(index, grad); }
  // After backward: queues parameters backward did not reach, waits for every allreduce and
  // replaces each .grad with the average over ranks. Throws if a collective failed.
  void Synchronize();

  int64_t allreduces() const { return allreduces_; }  // collectives issued so far (buckets)

 private:
  enum class State { kIdle, kReady, kDone };
  struct Entry {
    std::string name;
    torch::Tensor param;
    torch::Tensor grad;    // the gradient to send (queued by the hook)
    torch::Tensor result;  // the average, written by the loop; becomes .grad
    torch::Tensor spare;   // the other result tensor: .grad of the last step may still be it
    State state = State::kIdle;
    int64_t bytes = 0;
    unsigned hook = 0;
  };
  struct Bucket;

  void Queue(size_t index, const torch::Tensor& grad);
  void Loop();
  std::vector<size_t> AgreeOnReady(bool& stop);
  std::vector<std::vector<size_t>> MakeBuckets(const std::vector<size_t>& ready) const;
  void Reduce(const std::vector<std::vector<size_t>>& buckets);
  void StartBucket(Bucket& bucket, torch::Tensor& fusion_buffer);
  void FinishBucket(Bucket& bucket);

  std::vector<Entry> entries_;
  std::unique_ptr<Communicator> comm_;
  GradientSyncOptions options_;
  torch::Tensor fusion_buffers_[2];
  std::atomic<bool> sync_enabled_{true};  // read by the autograd thread's hooks

  std::mutex mu_;
  std::condition_variable done_;
  bool stop_requested_ = false;
  std::string error_;  // set by the loop when a collective failed
  int64_t allreduces_ = 0;
  std::thread loop_;
};

}  // namespace dtrain::clip
