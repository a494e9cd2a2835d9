// StepProfile: the PyTorch profiler (Kineto) over a range of training steps, saved as the Chrome
// trace torch.profiler writes (`*.pt.trace.json`): operators on the host, and on CUDA the
// kernels, copies and their launches (CUPTI). `dtrain timeline` merges it with the other ranks'
// traces as it merges a Python job's.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace dtrain::clip {

class StepProfile {
 public:
  // Steps `first` to `last` (1-based, inclusive) into `path`; first == 0: never.
  StepProfile(int64_t first, int64_t last, std::string path, const torch::Device& device);
  ~StepProfile();
  StepProfile(const StepProfile&) = delete;
  StepProfile& operator=(const StepProfile&) = delete;

  // Around each step: `step` is the step's own number.
  void BeforeStep(int64_t step);
  void AfterStep(int64_t step);
  // Stops and saves a profile still running (training ended inside the range).
  void Finish();

 private:
  int64_t first_, last_;
  std::string path_;
  torch::Device device_;
  bool running_ = false;
};

}  // namespace dtrain::clip
