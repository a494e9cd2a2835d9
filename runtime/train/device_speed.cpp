#include "runtime/train/device_speed.h"

#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <thread>

namespace dtrain::clip {
namespace {

// The fastest of kSpeedRuns timed runs of `work` after one untimed, in seconds.
double FastestRun(const torch::Device& device, const std::function<void()>& work) {
  auto sync = [&device] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  work();
  sync();
  double best = std::numeric_limits<double>::infinity();
  for (int run = 0; run < kSpeedRuns; ++run) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // runs apart, not one burst
    const auto start = std::chrono::steady_clock::now();
    work();
    sync();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return std::max(best, 1e-9);
}

std::string Detail(const char* what, double seconds) {
  char text[160];
  std::snprintf(text, sizeof text, "%s, fastest of %d runs %.3f ms", what, kSpeedRuns,
                seconds * 1000);
  return text;
}

}  // namespace

std::vector<DeviceSpeed> MeasureDeviceSpeed(const torch::Device& device) {
  torch::NoGradGuard no_grad;
  std::vector<DeviceSpeed> out;
  const bool cuda = device.is_cuda();

  const int64_t n = cuda ? 8192 : 1024;
  const auto dtype = cuda ? torch::kBFloat16 : torch::kFloat32;
  const auto options = torch::TensorOptions().device(device).dtype(dtype);
  {
    const torch::Tensor a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
    torch::Tensor c = torch::empty({n, n}, options);
    const double s = FastestRun(device, [&] { torch::mm_out(c, a, b); });
    char what[64];
    std::snprintf(what, sizeof what, "%s %lld x %lld", cuda ? "bfloat16" : "float32",
                  static_cast<long long>(n), static_cast<long long>(n));
    out.push_back({"matmul", 2.0 * n * n * n / s / 1e9, "GFLOP/s", Detail(what, s)});
  }
  {
    const int64_t bytes = (cuda ? 512LL : 64LL) << 20;
    const auto byte_options = torch::TensorOptions().device(device).dtype(torch::kUInt8);
    const torch::Tensor src = torch::ones({bytes}, byte_options);
    torch::Tensor dst = torch::empty({bytes}, byte_options);
    const double s = FastestRun(device, [&] { dst.copy_(src); });
    out.push_back({"memory-copy", bytes / s / 1e9, "GB/s",
                   Detail(cuda ? "512 MiB within the GPU" : "64 MiB within host memory", s)});
  }
  if (cuda) {
    const int64_t bytes = 256LL << 20;
    const torch::Tensor host =
        torch::ones({bytes}, torch::TensorOptions().dtype(torch::kUInt8).pinned_memory(true));
    torch::Tensor dst =
        torch::empty({bytes}, torch::TensorOptions().device(device).dtype(torch::kUInt8));
    const double s = FastestRun(device, [&] { dst.copy_(host, /*non_blocking=*/true); });
    out.push_back(
        {"host-to-device", bytes / s / 1e9, "GB/s", Detail("256 MiB from pinned memory", s)});
  }
  return out;
}

}  // namespace dtrain::clip
