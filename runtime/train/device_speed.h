// How fast a device runs the work a training step is made of, for `dtrain-clip check`:
//   matmul          a square matrix product, as the step's linear layers (bfloat16 8192 x 8192
//                   on CUDA, float32 1024 x 1024 on the CPU), in FLOP/s
//   memory-copy     a copy within the device's memory (512 MiB on CUDA, 64 MiB on the CPU), the
//                   bytes copied per second
//   host-to-device  CUDA only: a copy from pinned host memory (256 MiB), the input batch's path
//                   over PCIe
// Each is run once untimed, then timed kSpeedRuns times 20 ms apart (CUDA: synchronised before
// and after each), and the fastest run counts: a run slowed by other work counts for nothing, a
// slow device is slow every time. `dtrain doctor --compute` compares every rank's figures and names
// a device well below its peers (doctor/compute_verdict.h). Nothing here is compared with a fixed
// figure.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace dtrain::clip {

struct DeviceSpeed {
  std::string name;    // "matmul"
  double value = 0;    // per second, in `unit`
  std::string unit;    // "GFLOP/s", "GB/s"
  std::string detail;  // what was run, and its fastest run
};

inline constexpr int kSpeedRuns = 10;

// Throws what LibTorch throws (out of memory, a device error).
std::vector<DeviceSpeed> MeasureDeviceSpeed(const torch::Device& device);

}  // namespace dtrain::clip
