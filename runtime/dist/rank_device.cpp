#include "runtime/dist/rank_device.h"

#include <stdexcept>

#include <torch/cuda.h>

#include "runtime/dist/dist_env.h"

namespace dtrain::clip {

torch::Device RankDevice(const std::string& name) {
  torch::Device device(name);
  if (device.is_cuda() && !torch::cuda::is_available()) {
    throw std::runtime_error("--device " + name +
                             ": this LibTorch has no CUDA or no GPU is visible (build against a "
                             "CUDA LibTorch, check CUDA_VISIBLE_DEVICES)");
  }
  // Plain "cuda": each local rank takes its own GPU, as torchrun scripts do with
  // torch.cuda.set_device(LOCAL_RANK). When the launcher narrows CUDA_VISIBLE_DEVICES to one GPU
  // per rank, that GPU is cuda:0.
  if (device.is_cuda() && !device.has_index()) {
    int count = static_cast<int>(torch::cuda::device_count());
    int local_rank = ReadDistEnvFromProcess().local_rank;
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % count));
  }
  return device;
}

}  // namespace dtrain::clip
