// The device a rank runs on, from --device: "cpu", "cuda:N", or "cuda" alone for the local
// rank's GPU (LOCAL_RANK modulo the GPUs visible), as torchrun scripts pick it.
#pragma once

#include <string>

#include <torch/types.h>

namespace dtrain::clip {

// Throws std::runtime_error naming the flag when CUDA is asked for and none is visible.
torch::Device RankDevice(const std::string& name);

}  // namespace dtrain::clip
