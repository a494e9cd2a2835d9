#include "runtime/train/captured_step.h"

#include <ATen/autocast_mode.h>

#include <stdexcept>

#ifdef DTRAIN_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace dtrain::clip {

#ifdef DTRAIN_HAVE_CUDA
// One side stream for every warm-up run and the capture: the caching allocator keeps a stream's
// blocks for that stream, so warm-ups on streams drawn anew from the pool would each hold a
// step's worth of memory (seen on an H200: 39 GiB at batch 256 against eager's 10).
struct CapturedStep::CudaGraph {
  explicit CudaGraph(c10::DeviceIndex device) : side(c10::cuda::getStreamFromPool(false, device)) {}
  c10::cuda::CUDAStream side;
  at::cuda::CUDAGraph graph;
};

namespace {
// `waiter` runs nothing further until the work queued on `on` so far is done (no host wait).
void StreamWaits(c10::cuda::CUDAStream waiter, c10::cuda::CUDAStream on) {
  at::cuda::CUDAEvent event;
  event.record(on);
  event.block(waiter);
}
}  // namespace
#else
struct CapturedStep::CudaGraph {};
#endif

CapturedStep::CapturedStep(StepFunction step, bool capture, int warmup_steps)
    : step_(std::move(step)), capture_(capture), warmup_steps_(warmup_steps) {
#ifndef DTRAIN_HAVE_CUDA
  if (capture_) {
    throw std::runtime_error(
        "CUDA graphs: this dtrain-clip was built against a LibTorch without CUDA");
  }
#endif
  // A graph captured without warm-up would record the first-use allocations (moments, .grad)
  // as part of every replay.
  if (capture_ && warmup_steps_ < 1) warmup_steps_ = 1;
}

CapturedStep::~CapturedStep() = default;

bool CapturedStep::MatchesStaticShapes(const std::vector<torch::Tensor>& inputs) const {
  if (inputs.size() != static_inputs_.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].sizes() != static_inputs_[i].sizes() ||
        inputs[i].scalar_type() != static_inputs_[i].scalar_type() ||
        inputs[i].device() != static_inputs_[i].device()) {
      return false;
    }
  }
  return true;
}

std::vector<torch::Tensor> CapturedStep::Run(const std::vector<torch::Tensor>& inputs) {
  if (static_inputs_.empty()) {
    for (const torch::Tensor& input : inputs) static_inputs_.push_back(torch::empty_like(input));
  } else if (!MatchesStaticShapes(inputs)) {
    ++eager_fallbacks_;
    return step_(inputs);
  }
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < inputs.size(); ++i) static_inputs_[i].copy_(inputs[i]);
  }

  if (warmup_runs_ < warmup_steps_) {
    ++warmup_runs_;
#ifdef DTRAIN_HAVE_CUDA
    if (capture_) {
      // Warm-up on a side stream, as capture itself runs on one: the allocator then keeps the
      // warm-up's blocks apart from the default stream's.
      const c10::Device device = static_inputs_.front().device();
      if (!graph_) graph_ = std::make_unique<CudaGraph>(device.index());
      c10::cuda::CUDAStream side = graph_->side;
      c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(device.index());
      StreamWaits(side, main);  // the copies above, on the main stream, come first
      {
        c10::cuda::CUDAStreamGuard guard(side);
        RunOnStaticBuffers();
      }
      StreamWaits(main, side);
      return static_outputs_;
    }
#endif
    RunOnStaticBuffers();
    return static_outputs_;
  }
  ++replays_;
  if (!capture_) {
    RunOnStaticBuffers();
    return static_outputs_;
  }
  if (!captured_) Capture();
#ifdef DTRAIN_HAVE_CUDA
  graph_->graph.replay();
#endif
  return static_outputs_;
}

void CapturedStep::RunOnStaticBuffers() {
  std::vector<torch::Tensor> outputs = step_(static_inputs_);
  torch::NoGradGuard no_grad;
  if (static_outputs_.empty()) {
    for (const torch::Tensor& output : outputs)
      static_outputs_.push_back(torch::empty_like(output));
  }
  if (outputs.size() != static_outputs_.size()) {
    throw std::logic_error("captured step: the step returned a different number of outputs");
  }
  for (size_t i = 0; i < outputs.size(); ++i) static_outputs_[i].copy_(outputs[i]);
}

void CapturedStep::Capture() {
#ifdef DTRAIN_HAVE_CUDA
  const c10::Device device = static_inputs_.front().device();
  if (!device.is_cuda()) throw std::runtime_error("CUDA graphs: the step's inputs are not on CUDA");
  if (!graph_) graph_ = std::make_unique<CudaGraph>(device.index());
  c10::cuda::CUDAStream side = graph_->side;
  c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(device.index());
  StreamWaits(side, main);
  // Autocast's cache of cast weights would hand the capture casts made outside it.
  const bool cache = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  {
    c10::cuda::CUDAStreamGuard guard(side);
    graph_->graph.capture_begin();
    // Captured, not run: the outputs are where each replay leaves its results.
    static_outputs_ = step_(static_inputs_);
    graph_->graph.capture_end();
  }
  at::autocast::set_autocast_cache_enabled(cache);
  StreamWaits(main, side);
  // The warm-ups' blocks, cached for the side stream, are not used again: replays use the
  // graph's own pool. Handing them back keeps the peak near one step's worth.
  c10::cuda::CUDACachingAllocator::emptyCache();
  captured_ = true;
#endif
}

}  // namespace dtrain::clip
