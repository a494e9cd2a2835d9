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
struct CapturedStep::CudaGraph {
  at::cuda::CUDAGraph graph;
};

// One side stream for every warm-up run and capture: the caching allocator keeps a stream's
// blocks for that stream, so warm-ups on streams drawn anew from the pool would each hold a
// step's worth of memory (seen on an H200: 39 GiB at batch 256 against eager's 10). The graphs
// share the first one's memory pool: a replay's intermediates may then reuse what another
// graph's replay left, which only its outputs outlive (and Run's callers copy those before the
// next Run).
struct CapturedStep::CudaState {
  explicit CudaState(c10::DeviceIndex device) : side(c10::cuda::getStreamFromPool(false, device)) {}
  c10::cuda::CUDAStream side;
  bool pool_set = false;
  c10::MempoolId_t pool{0, 0};
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
struct CapturedStep::CudaState {};
#endif

CapturedStep::Shape::~Shape() = default;

CapturedStep::CapturedStep(StepFunction step, bool capture, int warmup_steps, int max_shapes)
    : step_(std::move(step)),
      capture_(capture),
      warmup_steps_(warmup_steps),
      max_shapes_(max_shapes < 1 ? 1 : max_shapes) {
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

const std::vector<torch::Tensor>& CapturedStep::static_inputs() const {
  static const std::vector<torch::Tensor> none;
  return shapes_.empty() ? none : shapes_.front()->inputs;
}

bool CapturedStep::captured() const {
  for (const auto& shape : shapes_) {
    if (shape->captured) return true;
  }
  return false;
}

CapturedStep::Shape* CapturedStep::ShapeFor(const std::vector<torch::Tensor>& inputs) {
  // `inputs` against `buffers`: the same count, dtypes and devices, and the same sizes (`exact`)
  // or only the same number of dimensions and first dimension.
  auto fits = [&inputs](const std::vector<torch::Tensor>& buffers, bool exact) {
    if (inputs.size() != buffers.size()) return false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const torch::Tensor &a = inputs[i], &b = buffers[i];
      if (a.scalar_type() != b.scalar_type() || a.device() != b.device()) return false;
      if (exact ? a.sizes() != b.sizes()
                : a.dim() != b.dim() || (a.dim() > 0 && a.size(0) != b.size(0))) {
        return false;
      }
    }
    return true;
  };
  for (const auto& shape : shapes_) {
    if (fits(shape->inputs, /*exact=*/true)) return shape.get();
  }
  // Another batch size (the last partial batch) is not worth a graph.
  if (!shapes_.empty() && (static_cast<int>(shapes_.size()) >= max_shapes_ ||
                           !fits(shapes_.front()->inputs, /*exact=*/false))) {
    return nullptr;
  }
  auto shape = std::make_unique<Shape>();
  for (const torch::Tensor& input : inputs) shape->inputs.push_back(torch::empty_like(input));
  shape->warmups_left = shapes_.empty() ? warmup_steps_ : (capture_ ? 1 : 0);
  shapes_.push_back(std::move(shape));
  return shapes_.back().get();
}

std::vector<torch::Tensor> CapturedStep::Run(const std::vector<torch::Tensor>& inputs) {
  Shape* shape = ShapeFor(inputs);
  if (shape == nullptr) {
    ++eager_fallbacks_;
    return step_(inputs);
  }
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < inputs.size(); ++i) shape->inputs[i].copy_(inputs[i]);
  }

  if (shape->warmups_left > 0) {
    --shape->warmups_left;
    ++warmup_runs_;
#ifdef DTRAIN_HAVE_CUDA
    if (capture_) {
      // Warm-up on the side stream, as capture itself runs on it: the allocator then keeps the
      // warm-up's blocks apart from the default stream's.
      const c10::Device device = shape->inputs.front().device();
      if (!cuda_) cuda_ = std::make_unique<CudaState>(device.index());
      c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(device.index());
      StreamWaits(cuda_->side, main);  // the copies above, on the main stream, come first
      {
        c10::cuda::CUDAStreamGuard guard(cuda_->side);
        RunOnStaticBuffers(*shape);
      }
      StreamWaits(main, cuda_->side);
      return shape->outputs;
    }
#endif
    RunOnStaticBuffers(*shape);
    return shape->outputs;
  }
  ++replays_;
  if (!capture_) {
    RunOnStaticBuffers(*shape);
    return shape->outputs;
  }
  if (!shape->captured) Capture(*shape);
#ifdef DTRAIN_HAVE_CUDA
  shape->graph->graph.replay();
#endif
  return shape->outputs;
}

void CapturedStep::RunOnStaticBuffers(Shape& shape) {
  std::vector<torch::Tensor> outputs = step_(shape.inputs);
  torch::NoGradGuard no_grad;
  if (shape.outputs.empty()) {
    for (const torch::Tensor& output : outputs) shape.outputs.push_back(torch::empty_like(output));
  }
  if (outputs.size() != shape.outputs.size()) {
    throw std::logic_error("captured step: the step returned a different number of outputs");
  }
  for (size_t i = 0; i < outputs.size(); ++i) shape.outputs[i].copy_(outputs[i]);
}

void CapturedStep::Capture(Shape& shape) {
#ifdef DTRAIN_HAVE_CUDA
  const c10::Device device = shape.inputs.front().device();
  if (!device.is_cuda()) throw std::runtime_error("CUDA graphs: the step's inputs are not on CUDA");
  if (!cuda_) cuda_ = std::make_unique<CudaState>(device.index());
  shape.graph = std::make_unique<CudaGraph>();
  c10::cuda::CUDAStream main = c10::cuda::getCurrentCUDAStream(device.index());
  StreamWaits(cuda_->side, main);
  // Autocast's cache of cast weights would hand the capture casts made outside it.
  const bool cache = at::autocast::is_autocast_cache_enabled();
  at::autocast::set_autocast_cache_enabled(false);
  {
    c10::cuda::CUDAStreamGuard guard(cuda_->side);
    if (cuda_->pool_set) {
      shape.graph->graph.capture_begin(cuda_->pool);
    } else {
      shape.graph->graph.capture_begin();
    }
    // Captured, not run: the outputs are where each replay leaves its results.
    shape.outputs = step_(shape.inputs);
    shape.graph->graph.capture_end();
  }
  at::autocast::set_autocast_cache_enabled(cache);
  if (!cuda_->pool_set) {
    cuda_->pool = shape.graph->graph.pool();
    cuda_->pool_set = true;
  }
  StreamWaits(main, cuda_->side);
  // The warm-ups' blocks, cached for the side stream, are not used again: replays use the
  // graphs' pool. Handing them back keeps the peak near one step's worth.
  c10::cuda::CUDACachingAllocator::emptyCache();
  shape.captured = true;
#endif
}

}  // namespace dtrain::clip
