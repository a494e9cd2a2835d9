// CapturedStep: a training step replayed as a CUDA graph (--cuda-graphs). A graph replays fixed
// kernels on fixed addresses, so whatever a step reads that changes from step to step (the
// batch, the learning rate) is an input, copied into static buffers before each step, and
// everything else it touches (parameters, gradients, optimizer state) must keep its storage.
// The copy-in, the step on the static buffers and the static outputs are the same code on every
// device: on CUDA the step is captured once, after warm-up runs on a side stream, and replayed;
// on the CPU there is nothing to capture and the same step runs eagerly on the same static
// buffers, which is how the CPU tests check this class. Inputs of other shapes than the first
// (the last partial batch) run eagerly as given; the graph is kept for the next full batch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace dtrain::clip {

class CapturedStep {
 public:
  using StepFunction =
      std::function<std::vector<torch::Tensor>(const std::vector<torch::Tensor>& inputs)>;

  // `capture`: record a CUDA graph (inputs on one CUDA device; a build without CUDA throws);
  // false: run the step eagerly on the static buffers. `warmup_steps` eager runs on the static
  // buffers come first (on CUDA on a side stream, as capture needs): state created on first use
  // (optimizer moments, .grad, library workspaces) must exist before the capture.
  CapturedStep(StepFunction step, bool capture, int warmup_steps = 3);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // One step. Copies `inputs` into the static buffers (made on the first call, shaped as those
  // inputs) and runs the step on them: a warm-up run, the capture (which then replays once, so
  // this step happens too) or a replay. Returns the step's outputs in static buffers,
  // overwritten by the next Run (clone to keep them). Inputs shaped otherwise: step(inputs).
  std::vector<torch::Tensor> Run(const std::vector<torch::Tensor>& inputs);

  const std::vector<torch::Tensor>& static_inputs() const { return static_inputs_; }
  bool captured() const { return captured_; }
  int64_t warmup_runs() const { return warmup_runs_; }
  int64_t replays() const { return replays_; }  // runs after warm-up, the capturing one included
  int64_t eager_fallbacks() const { return eager_fallbacks_; }  // other shapes, run as given

 private:
  bool MatchesStaticShapes(const std::vector<torch::Tensor>& inputs) const;
  // The step on the static buffers, outputs copied into the static outputs (warm-up, CPU runs).
  void RunOnStaticBuffers();
  void Capture();  // CUDA only

  struct CudaGraph;  // at::cuda::CUDAGraph and the side stream, where the build has CUDA
  StepFunction step_;
  bool capture_;
  int warmup_steps_;
  std::vector<torch::Tensor> static_inputs_, static_outputs_;
  std::unique_ptr<CudaGraph> graph_;
  bool captured_ = false;
  int64_t warmup_runs_ = 0, replays_ = 0, eager_fallbacks_ = 0;
};

}  // namespace dtrain::clip
