// CapturedStep: a training step replayed as a CUDA graph (--cuda-graphs). A graph replays fixed
// kernels on fixed addresses, so whatever a step reads that changes from step to step (the
// batch, the learning rate) is an input, copied into static buffers before each step, and
// everything else it touches (parameters, gradients, optimizer state) must keep its storage.
// The copy-in, the step on the static buffers and the static outputs are the same code on every
// device: on CUDA the step is captured, after warm-up runs on a side stream, and replayed; on
// the CPU there is nothing to capture and the same step runs eagerly on the same static
// buffers, which is how the CPU tests check this class.
//
// A graph holds one set of input shapes. Inputs of another shape with the same first dimension
// as the first inputs (a batch whose text is cut to another length) get static buffers and a
// graph of their own, up to `max_shapes` sets, the graphs sharing one memory pool; the rest (the
// last partial batch, shapes beyond the limit) run eagerly as given.
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

  // `capture`: record CUDA graphs (inputs on one CUDA device; a build without CUDA throws);
  // false: run the step eagerly on the static buffers. `warmup_steps` eager runs on the first
  // shape's static buffers come first (on CUDA on a side stream, as capture needs): state
  // created on first use (optimizer moments, .grad, library workspaces) must exist before the
  // capture. Each later shape has one warm-up run (its libraries' plans for that shape).
  CapturedStep(StepFunction step, bool capture, int warmup_steps = 3, int max_shapes = 1);
  ~CapturedStep();
  CapturedStep(const CapturedStep&) = delete;
  CapturedStep& operator=(const CapturedStep&) = delete;

  // One step. Copies `inputs` into their shape's static buffers (made on that shape's first
  // call) and runs the step on them: a warm-up run, the capture (which then replays once, so
  // this step happens too) or a replay. Returns the step's outputs in static buffers,
  // overwritten by the next Run of any shape (clone to keep them). Inputs without static
  // buffers of their own: step(inputs).
  std::vector<torch::Tensor> Run(const std::vector<torch::Tensor>& inputs);

  // The first shape's static inputs.
  const std::vector<torch::Tensor>& static_inputs() const;
  bool captured() const;  // a graph is captured (for any shape)
  int64_t shapes() const { return static_cast<int64_t>(shapes_.size()); }
  int64_t warmup_runs() const { return warmup_runs_; }
  int64_t replays() const { return replays_; }  // runs after warm-up, the capturing ones included
  int64_t eager_fallbacks() const { return eager_fallbacks_; }  // run as given

 private:
  struct CudaGraph;  // at::cuda::CUDAGraph, where the build has CUDA
  struct Shape {
    std::vector<torch::Tensor> inputs, outputs;
    int warmups_left = 0;
    bool captured = false;
    std::unique_ptr<CudaGraph> graph;
    ~Shape();
  };
  struct CudaState;  // the side stream and the graphs' shared pool, where the build has CUDA

  // The static buffers for `inputs`' shapes, made if the limit allows; null: run as given.
  Shape* ShapeFor(const std::vector<torch::Tensor>& inputs);
  // The step on `shape`'s static buffers, outputs copied into its static outputs.
  void RunOnStaticBuffers(Shape& shape);
  void Capture(Shape& shape);  // CUDA only

  StepFunction step_;
  bool capture_;
  int warmup_steps_;
  int max_shapes_;
  std::vector<std::unique_ptr<Shape>> shapes_;
  std::unique_ptr<CudaState> cuda_;
  int64_t warmup_runs_ = 0, replays_ = 0, eager_fallbacks_ = 0;
};

}  // namespace dtrain::clip
