#include "runtime/train/step_scalars.h"

#include <stdexcept>

#ifdef DTRAIN_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace dtrain::clip {

#ifdef DTRAIN_HAVE_CUDA
struct StepScalars::CudaEvent {
  at::cuda::CUDAEvent event;
};
#else
struct StepScalars::CudaEvent {};
#endif

StepScalars::StepScalars(const torch::Device& device) : device_(device) {}

StepScalars::~StepScalars() = default;

void StepScalars::Queue(const torch::Tensor& values) {
  if (queued_) throw std::logic_error("StepScalars: the last values were not taken");
  torch::NoGradGuard no_grad;
  auto flat = values.detach().reshape({-1}).to(torch::kDouble);
  queued_ = true;
#ifdef DTRAIN_HAVE_CUDA
  if (flat.is_cuda()) {
    if (!host_.defined() || host_.numel() != flat.numel()) {
      host_ = torch::empty({flat.numel()},
                           torch::TensorOptions().dtype(torch::kDouble).pinned_memory(true));
    }
    host_.copy_(flat, /*non_blocking=*/true);
    if (!event_) event_ = std::make_unique<CudaEvent>();
    event_->event.record(at::cuda::getCurrentCUDAStream(flat.device().index()));
    return;
  }
#endif
  host_ = flat.to(torch::kCPU).contiguous();
}

std::vector<double> StepScalars::Take() {
  if (!queued_) throw std::logic_error("StepScalars: nothing queued");
  queued_ = false;
#ifdef DTRAIN_HAVE_CUDA
  if (event_ && device_.is_cuda()) event_->event.synchronize();
#endif
  const double* v = host_.data_ptr<double>();
  return std::vector<double>(v, v + host_.numel());
}

}  // namespace dtrain::clip
