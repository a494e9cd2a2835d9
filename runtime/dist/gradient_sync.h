// GradientSync: Horovod-style data-parallel gradient averaging. A hook on every parameter's
// gradient accumulator marks it ready the moment backward has written its .grad; a background
// loop agrees with the other ranks, once per cycle, on which gradients are ready everywhere and
// allreduces them in buckets while backward goes on. Gradients that lie side by side in one
// buffer (FlatParameters' flat gradients) are reduced in place, as one view, with no copy; the
// others are packed into a fusion buffer. Synchronize() waits until every .grad holds the average.
// The parts, as Horovod splits them: SyncController (the agreement collectives), PlanBuckets
// (bucket_plan.h), the fusion-buffer operations (fusion_buffer.h); this class is the loop.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/dist/bucket_plan.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/sync_controller.h"

namespace torch::autograd {
struct Node;
}

namespace dtrain::clip {

struct GradientSyncOptions {
  int64_t fusion_threshold_bytes = 64 << 20;  // bucket size; 0 = one allreduce per tensor
  double cycle_time_ms = 1.0;                 // how often ranks agree on what is ready
  bool broadcast_parameters = true;           // copy rank 0's parameters to all at start
  // true: every rank's backward was seeded with 1/world size (Horovod's prescale), so the sum
  // over ranks already is the average and no pass over the gradients divides them afterwards.
  bool gradients_prescaled = false;
  // Keep the members of every bucket issued (buckets_issued()), for tests: grows with each step.
  bool record_buckets = false;
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
  // The .grad of parameter `index` (construction order) is complete for this step: what the hook
  // reports after autograd accumulated it, for gradients written outside autograd. The caller
  // leaves that .grad alone until Synchronize(), which overwrites it in place with the average.
  void MarkReady(size_t index);
  // The same for `parameter` (one of those given at construction; any other is ignored).
  void MarkReady(const torch::Tensor& parameter);
  // After backward: queues parameters backward did not reach (a missing .grad counts as zeros),
  // waits for every allreduce; each .grad then holds the average over ranks, in the tensor it
  // was (views of a flat gradient buffer stay views). Throws if a collective failed.
  void Synchronize();

  int64_t allreduces() const { return allreduces_; }  // collectives issued so far (buckets)
  // Gradient bytes reduced in place (no copy) and through the fusion buffer, so far.
  int64_t bytes_in_place() const { return bytes_in_place_; }
  int64_t bytes_copied() const { return bytes_copied_; }
  // With options.record_buckets: every bucket issued so far, in the order the collectives were
  // issued, as the indices (construction order) of its gradients. Must be the same on every rank.
  std::vector<std::vector<size_t>> buckets_issued() const;

 private:
  enum class State { kIdle, kReady, kDone };
  struct Entry {
    std::string name;
    torch::Tensor param;
    torch::Tensor grad;  // the .grad being reduced, from MarkReady until Synchronize
    State state = State::kIdle;
    int64_t bytes = 0;
    std::shared_ptr<torch::autograd::Node> accumulator;  // kept alive: it carries our hook
    uintptr_t hook = 0;
  };
  struct Bucket;

  void Loop();
  std::vector<size_t> AgreeOnReady(bool& stop);
  void Reduce(const std::vector<PlannedBucket>& plan);
  void StartBucket(Bucket& bucket, torch::Tensor* fusion_buffer);
  void FinishBucket(Bucket& bucket);

  std::vector<Entry> entries_;
  std::unordered_map<const void*, size_t> index_of_;  // parameter's TensorImpl -> its entry
  std::unique_ptr<Communicator> comm_;
  GradientSyncOptions options_;
  std::unique_ptr<SyncController> controller_;
  // Chains of gradients that lie end to end in one buffer, in memory order, the same on every
  // rank (each chain is one flat gradient buffer or a part of one); at least two links each.
  std::vector<std::vector<size_t>> chains_;
  std::vector<GradientSlot> slots_;  // what the bucket planner knows of each gradient
  torch::Tensor fusion_buffers_[2];
  std::atomic<bool> sync_enabled_{true};  // read by the autograd thread's hooks

  std::mutex mu_;
  std::condition_variable done_;  // a bucket finished (or the loop failed)
  std::condition_variable work_;  // a gradient became ready, or stop was requested
  bool stop_requested_ = false;
  size_t idle_count_ = 0, ready_count_ = 0;  // entries in State::kIdle, State::kReady
  std::string error_;                        // set by the loop when a collective failed
  std::atomic<int64_t> allreduces_{0}, bytes_in_place_{0}, bytes_copied_{0};
  mutable std::mutex log_mu_;
  std::vector<std::vector<size_t>> buckets_issued_;  // options_.record_buckets only
  std::thread loop_;
};

}  // namespace dtrain::clip
