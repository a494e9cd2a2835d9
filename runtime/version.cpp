#include "runtime/version.h"

#include <torch/version.h>

#include <cstdint>

#ifdef DTRAIN_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <torch/csrc/cuda/nccl.h>
#endif

namespace dtrain::clip {

const char* ClipVersion() { return DTRAIN_CLIP_VERSION; }

std::string BuildReport() {
  std::string out = std::string("dtrain-clip ") + ClipVersion() + "\n";
  out += std::string("libtorch ") + TORCH_VERSION + "\n";
#ifdef DTRAIN_HAVE_CUDA
  out += "cuda " + std::to_string(CUDART_VERSION / 1000) + "." +
         std::to_string(CUDART_VERSION % 1000 / 10) + "\n";
  // LibTorch's own NCCL, encoded as major << 32 | minor << 16 | patch.
  const std::uint64_t nccl = torch::cuda::nccl::version();
  out += "nccl " + std::to_string(nccl >> 32) + "." + std::to_string((nccl >> 16) & 0xffff) + "." +
         std::to_string(nccl & 0xffff) + "\n";
#else
  out += "cuda none\nnccl none\n";
#endif
#ifdef DTRAIN_HAVE_GLOO
  out += "gloo yes\n";
#else
  out += "gloo no\n";
#endif
  return out;
}

}  // namespace dtrain::clip
