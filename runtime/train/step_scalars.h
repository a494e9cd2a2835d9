// StepScalars: a step's few numbers for its metrics line (loss, logit scale), brought from the
// training device to the host without making the host wait for the device.
//
// On CUDA, Queue() puts a copy into pinned host memory behind the step's own work and records an
// event; Take() waits for that event alone, so a caller that queues step N's copy and takes it
// after step N+1's work is queued leaves the device busy with step N+1 meanwhile. A `.item()` in
// its place waits for everything queued, and the device idles while the host prepares the next
// batch. On the CPU the values are read at once (the work is already done).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

namespace dtrain::clip {

class StepScalars {
 public:
  explicit StepScalars(const torch::Device& device);
  ~StepScalars();
  StepScalars(const StepScalars&) = delete;
  StepScalars& operator=(const StepScalars&) = delete;

  // Queues a copy of `values` (any shape, read as a flat list) for the host. One at a time: a
  // queued copy must be taken before the next is queued.
  void Queue(const torch::Tensor& values);
  // The queued values, waiting for their copy alone if the device has not made it yet.
  std::vector<double> Take();

 private:
  torch::Device device_;
  torch::Tensor host_;  // pinned on CUDA
  bool queued_ = false;
  struct CudaEvent;  // the copy's event, where the build has CUDA
  std::unique_ptr<CudaEvent> event_;
};

}  // namespace dtrain::clip
