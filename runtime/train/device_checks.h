// Device checks (`dtrain-clip check`): the computations dtrain-clip's training step takes on a
// device, each run there and compared with a reference, so that a new machine (or a new
// LibTorch, CUDA or GPU) says before a run whether the fast paths are right on it:
//   attention          the step's attention (SDPA through QueriesKeysValues in bfloat16 on
//                      CUDA, the fused float32 kernel on the CPU), with and without the causal
//                      mask, against ATen's matmul and softmax in float32: values and gradient
//   patch-embedding    the patch embedding as one matrix product (CUDA's path) against the
//                      convolution: values and weight gradient
//   linear-rows        LinearRows (one autograd node) against addmm over the rows with its
//                      views: values and the three gradients
//   fused-bias-grad    the weight's and bias's gradients from one cuBLASLt product
//                      (--fused-bias-grad) against the product and the sum over the rows; on
//                      the CPU, that the fused product declines
//   layer-norm         every LayerNorm of a training step is given the flat buffer's views,
//                      16-byte aligned, as ATen's vectorised CUDA LayerNorm needs; on CUDA also
//                      the kernels the profiler saw (vectorised, and none of the slower pair)
//   weight-copies      three bf16 steps with the matrix weights' bfloat16 copies against the
//                      same steps with autocast's cast of each weight at its use
//   captured-step      three steps replayed from static buffers (captured as a CUDA graph on
//                      CUDA, eager on the CPU) against the same steps run eagerly
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/train/flat_parameters.h"

namespace dtrain::clip {

struct DeviceCheck {
  std::string name;
  bool passed = false;
  std::string detail;  // what was compared, what was measured, against which limit
};

// Runs every check on `device`; a check that throws fails with the error as its detail.
std::vector<DeviceCheck> RunDeviceChecks(const torch::Device& device);

// A CUDA device's model ("NVIDIA H100 80GB HBM3", cudaGetDeviceProperties' name); "" for another
// device or where it cannot be read. `dtrain-clip check` names it beside the device, so that the
// doctor compares each GPU with others of its model, on a node with two models too.
std::string DeviceModel(const torch::Device& device);

// What one training step of the fmnist-tiny model, its parameters flattened in `layout`, gave each
// LayerNorm (aten::native_layer_norm) on `device`, and where its gradients ended.
struct StepAlignment {
  int64_t layer_norm_modules = 0;   // LayerNorm modules in the model
  int64_t calls = 0;                // native_layer_norm calls in the step
  int64_t calls_on_parameters = 0;  // ... whose weight and bias were the parameters themselves
  int64_t calls_aligned = 0;        // ... with input, weight and bias 16-byte aligned, rows of 4k
  int64_t whole_vector_parameters = 0;         // parameters of a multiple of 4 floats
  int64_t gradients_in_place_and_aligned = 0;  // ... whose gradient is its aligned flat view
  int64_t vectorised_kernels = 0;              // CUDA: vectorized_layer_norm_kernel launches
  int64_t slower_kernels = 0;  // CUDA: RowwiseMomentsCUDAKernel + LayerNormForwardCUDAKernel
};
StepAlignment AlignmentOfAStep(const torch::Device& device, FlatLayout layout);

}  // namespace dtrain::clip
